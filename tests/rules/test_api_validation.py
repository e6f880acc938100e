"""Every ``torch.npu.*`` / ``torch_npu.*`` name the tool can emit exists in torch-npu.

The names come from three places:

* the expected outputs of the golden fixtures (``fixtures/rules/**/*.after.py``),
  minus names already present in the matching ``.before.py`` (user code, not ours);
* the ``after`` side of every rule's documented examples;
* string constants in the rule modules (suggestion tables, messages), which users
  read and copy.

Each name is checked against the table generated from the published wheel
(``npu_migrate.pipeline.npu_api.load_api().has``), the same one the rules consult.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import npu_migrate.rules as rules_package
import pytest

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.python.cuda_only import ast_dotted_name

from .golden import ROOT

ROOTS = ("torch.npu", "torch_npu")
#: A dotted name rooted at torch.npu / torch_npu inside prose.
_IN_TEXT = re.compile(r"(?<![\w.])(?:torch\.npu|torch_npu)(?:\.[A-Za-z_]\w*)*")


def _npu_rooted(name: str) -> bool:
    return any(name == root or name.startswith(root + ".") for root in ROOTS)


def names_in_code(source: str) -> set[str]:
    """Qualified torch.npu / torch_npu names a module imports or reads (the longest
    dotted chain of each read, resolved through the module's imports)."""
    tree = ast.parse(source)
    bindings: dict[str, str] = {}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    bindings[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                full = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
                found.add(full)
                if alias.name != "*":
                    bindings[alias.asname or alias.name] = full
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner:
            dotted = ast_dotted_name(node)
            if dotted is None:
                continue
            root, _, rest = dotted.partition(".")
            if root in bindings:
                found.add(bindings[root] + ("." + rest if rest else ""))
    return {name for name in found if _npu_rooted(name)}


def names_in_text(text: str) -> set[str]:
    return set(_IN_TEXT.findall(text))


#: Documentation prose may name what does *not* exist, to warn about it ("`torch.npu.matmul.allow_tf32 = True`
#: is silently ignored"); the scan covers what rules hand to users as advice: tables, messages, suggestions.
_PROSE_ATTRIBUTES = frozenset({"rationale", "summary"})


def _docstrings_and_prose(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in _PROSE_ATTRIBUTES for t in node.targets
        ):
            skip.update(id(n) for n in ast.walk(node.value))
    return skip


def _public(name: str) -> bool:
    """The table lists public API only: ``torch_npu._C...`` or ``__version__`` cannot be checked."""
    return not any(part.startswith("_") for part in name.split("."))


def rule_module_strings(path: Path) -> set[str]:
    """Public torch.npu / torch_npu names in the string constants of a rule module
    (f-string parts included; docstrings, ``rationale`` and ``summary`` prose excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings_and_prose(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            names |= {n for n in names_in_text(node.value) if _public(n)}
    return names


def missing(names: set[str]) -> list[str]:
    api = load_api()
    return sorted(name for name in names if not api.has(name))


# -- the collectors and the checker can fail -----------------------------------------


def test_known_bad_names_are_caught():
    code = (
        "import torch\n"
        "import torch_npu\n"
        "from torch_npu.optim import NpuFusedAdamW, NpuFusedNothing\n"
        "import torch_npu.contrib.transfer_to_npu\n"
        "torch.npu.nvtx.range_push('x')\n"
        "torch.npu.matmul.allow_hf32 = True\n"
        "y = torch_npu.npu_fusion_attention(q, k, v, 8, 'BSND')[0]\n"
        "z = torch_npu.npu_flash_attention_v9(q)\n"
    )
    names = names_in_code(code)
    assert {
        "torch_npu",
        "torch_npu.optim.NpuFusedAdamW",
        "torch_npu.optim.NpuFusedNothing",
        "torch_npu.contrib.transfer_to_npu",
        "torch.npu.nvtx.range_push",
        "torch.npu.matmul.allow_hf32",
        "torch_npu.npu_fusion_attention",
        "torch_npu.npu_flash_attention_v9",
    } <= names
    assert missing(names) == [
        "torch.npu.nvtx.range_push",
        "torch_npu.npu_flash_attention_v9",
        "torch_npu.optim.NpuFusedNothing",
    ]


def test_aliases_are_resolved():
    code = "import torch_npu as tnpu\nfrom torch import npu\nfrom torch.npu import amp as namp\ntnpu.npu_rms_norm(x, w)\nnpu.synchronize()\nnamp.GradScaler()\n"
    assert {"torch_npu.npu_rms_norm", "torch.npu.synchronize", "torch.npu.amp.GradScaler"} <= names_in_code(code)


def test_prose_names_are_found():
    text = "use torch.npu.CUDAGraph, torch_npu.optim.NpuFusedAdamW(params) or `torch.npu.matmul.allow_hf32`; see torch_npu."
    assert names_in_text(text) == {"torch.npu.CUDAGraph", "torch_npu.optim.NpuFusedAdamW", "torch.npu.matmul.allow_hf32", "torch_npu"}
    assert missing(names_in_text(text)) == ["torch.npu.CUDAGraph"]


def test_rule_module_scan_skips_prose_but_not_tables(tmp_path):
    module = tmp_path / "npu999_fake.py"
    module.write_text(
        '"""Docstring: torch.npu.docstring_only is not checked."""\n'
        "TABLE = {'torch.cuda.x': 'use torch.npu.not_a_real_name()', 'y': f'or torch_npu.npu_fake_{1}'}\n"
        "class R:\n"
        "    rationale = 'torch.npu.matmul.allow_tf32 = True is silently ignored'\n"
        "    summary = 'Rewrite torch.cuda.X to torch.npu.X'\n"
        "    message = 'use torch.npu.synchronize'\n"
        "    def f(self):\n"
        "        self.report(None, 'see torch_npu._C._private and torch_npu.__version__', 'torch.npu.also_fake')\n",
        encoding="utf-8",
    )
    names = rule_module_strings(module)
    assert names == {"torch.npu.not_a_real_name", "torch_npu.npu_fake_", "torch.npu.synchronize", "torch.npu.also_fake"}
    assert missing(names) == ["torch.npu.also_fake", "torch.npu.not_a_real_name", "torch_npu.npu_fake_"]


def test_torch_npu_npu_is_torch_npu():
    api = load_api()
    assert api.has("torch_npu.npu.amp.GradScaler") and api.has("torch_npu.npu.synchronize")
    assert not api.has("torch_npu.npu.nvtx")


def test_submodule_attributes_exist():
    """Config objects and submodules: attributes one level below a table module."""
    api = load_api()
    assert api.has("torch.npu.matmul.allow_hf32")
    assert api.has("torch.npu.conv.allow_hf32")
    assert api.has("torch.npu.amp.GradScaler")
    assert not api.has("torch.npu.matmul.allow_tf32")
    assert not api.has("torch.npu.nvtx")


# -- the tool's outputs ------------------------------------------------------------------


def _after_fixtures() -> list[Path]:
    return sorted(ROOT.glob("*/*.after.py"))


@pytest.mark.parametrize("after", _after_fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_outputs_use_existing_names(after: Path):
    before = after.with_name(after.name.replace(".after.py", ".before.py"))
    emitted = names_in_code(after.read_text(encoding="utf-8"))
    if before.exists():
        emitted -= names_in_code(before.read_text(encoding="utf-8"))
    assert missing(emitted) == []


EXAMPLES = [(rid, i, ex) for rid, rule in rules_for("python").items() for i, ex in enumerate(rule.examples) if ex.after is not None]


@pytest.mark.parametrize("rid,index,example", EXAMPLES, ids=[f"{r}-{i}" for r, i, _ in EXAMPLES])
def test_documented_examples_use_existing_names(rid, index, example):
    emitted = names_in_code(example.after) - names_in_code(example.before)
    assert missing(emitted) == []


RULE_MODULES = sorted(Path(rules_package.__path__[0]).rglob("*.py"))


@pytest.mark.parametrize("path", RULE_MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rule_modules_mention_existing_names(path: Path):
    assert missing(rule_module_strings(path)) == []


def test_the_scan_sees_the_suggestion_tables():
    """The rule-module scan reaches real suggestion tables (else it checks nothing)."""
    scanned = set().union(*(rule_module_strings(p) for p in RULE_MODULES))
    assert "torch_npu.npu_fusion_attention" in scanned  # NPU901's call mapping
    assert "torch_npu.optim.NpuFusedAdamW" in scanned  # NPU903's apex table
    assert any(name.startswith("torch.npu.") for name in scanned)


def test_profiler_mapping_targets_exist():
    """Every torch_npu.profiler name NPU610 can write, from its mapping table (the
    fixtures show only some of the ProfilerAction members)."""
    from npu_migrate.rules.profiler._common import NAMES, SOURCE, mapped

    sources = [f"{SOURCE}.{name}" for name in NAMES]
    sources += [f"{SOURCE}.{name}.{member}" for name, members in NAMES.items() for member in members or ()]
    targets = {source: mapped(source) for source in sources}
    assert None not in targets.values(), targets
    assert "torch_npu.profiler.ProfilerActivity.NPU" in targets.values()
    assert missing(set(targets.values())) == []
