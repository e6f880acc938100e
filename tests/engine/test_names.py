"""Name resolution: the import table agrees with libcst's QualifiedNameProvider,
and the engine falls back to the exact resolver when a name is shadowed."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from npu_migrate.python.engine import migrate_source
from npu_migrate.python.names import (
    BindingCollector,
    ImportTableResolver,
    ScopeResolver,
    build_import_table,
)

REPO = Path(__file__).resolve().parents[2]

SAMPLES = {
    "plain": "import torch\ntorch.cuda.synchronize()\n",
    "alias_module": "import torch.cuda as tc\ntc.synchronize()\n",
    "from_module": "from torch import cuda\ncuda.synchronize()\n",
    "from_member": "from torch.cuda import synchronize as sync\nsync()\n",
    "submodule_import": "import torch.cuda\ntorch.cuda.synchronize()\n",
    "dist_alias": "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
    "nested_import": "def f():\n    import torch.cuda as tc\n    return tc.device_count()\n",
    "guarded": "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
}


def _pairs(source: str):
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    table = build_import_table(module, has_nested_imports=True)
    fast, exact = ImportTableResolver(table), ScopeResolver(wrapper)
    bindings = BindingCollector()
    cst.visit_batched(module, [bindings])
    out = []

    class Collect(cst.CSTVisitor):
        def visit_Attribute(self, node):
            out.append(node)

        def visit_Name(self, node):
            out.append(node)

    module.visit(Collect())
    return [(n, fast.qualified_name(n), exact.qualified_name(n)) for n in out], table, bindings.bound


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_import_table_agrees_with_qualified_name_provider(name):
    pairs, table, bound = _pairs(SAMPLES[name])
    for node, fast, exact in pairs:
        if exact is None:
            continue  # the fast resolver may know more (e.g. names in import statements)
        root = (fast or "").split(".")[0]
        if root in bound:
            continue  # shadowed roots are what the engine's fallback is for
        assert fast == exact, cst.Module([]).code_for_node(node)


def test_fixtures_resolve_identically():
    """On every fixture, wherever the exact resolver finds an import-based name and no
    local binding shadows its root, the fast resolver finds the same one."""
    files = sorted((REPO / "fixtures").rglob("*.py"))
    checked = 0
    for path in files:
        try:
            pairs, table, bound = _pairs(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError):
            continue
        for node, fast, exact in pairs:
            if exact is None or (node.value if isinstance(node, cst.Name) else None) in bound:
                continue
            if exact.startswith("."):
                continue  # a relative import names the project's own module, never one a rule knows
            dotted = cst.helpers.get_full_name_for_node(node) or ""
            if dotted.split(".")[0] in bound or dotted.split(".")[0] in table.conflicting:
                continue
            assert fast == exact, f"{path}: {dotted}"
            checked += 1
    assert checked > 0 or not files


def test_shadowed_torch_is_not_rewritten():
    source = b"import torch\n\ndef f(torch):\n    return torch.cuda.is_available()\n\nn = torch.cuda.device_count()\n"
    result = migrate_source("t.py", source)
    out = result.new_source.decode()
    assert "return torch.cuda.is_available()" in out  # the parameter, not the module
    assert "n = torch.npu.device_count()" in out


def test_local_variable_named_like_an_alias():
    source = b"import torch.cuda as tc\n\ndef f():\n    tc = object()\n    return tc.synchronize\n"
    result = migrate_source("t.py", source)
    assert result.new_source is None or b"tc = object()" in result.new_source
