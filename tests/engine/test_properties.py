"""Properties over generated input (hypothesis):

* code with no CUDA relevance is never touched, however it is formatted;
* around a CUDA line, every unrelated line survives byte for byte;
* for any mix of the rule fixtures, the output parses and a second run changes nothing;
* a second run over the output reports the same findings as the first (nothing left
  for manual work disappears once the tool has rewritten the code around it);
* for any mix of the AMP and checkpoint fixtures, a second run over the written file
  reports the same findings, where the first run's report puts them.
"""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source
from npu_migrate.reporting.relocate import relocate

ALL = Settings(selection=Selection.create(["ALL"]))
RULE_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
FIXTURES = sorted(RULE_FIXTURES.glob("*/*.before.py"))
#: NPU3xx and NPU4xx read each other's output (NPU401 finds the GradScalers NPU301
#: rewrote), negative cases included: their findings cite other lines of the file
AMP_AND_CHECKPOINT = sorted(
    p for family in ("NPU3*", "NPU4*") for kind in ("before", "unchanged") for p in RULE_FIXTURES.glob(f"{family}/*.{kind}.py")
)

identifiers = st.sampled_from(["x", "model", "data", "loss", "step", "np", "cfg", "device_name", "gpu_count", "cudnn_ok"])
numbers = st.integers(min_value=-5, max_value=500).map(str)
words = st.text(alphabet=st.sampled_from("abcdefghij XYZ_:-0123"), max_size=12)
strings = st.tuples(st.sampled_from(["'", '"', "'''"]), words).map(lambda q: f"{q[0]}{q[1]}{q[0]}")
comments = st.sampled_from(["", "  # comment", "  # uses the GPU? no", "    #   odd   spacing"])
newlines = st.sampled_from(["\n", "\r\n"])


@st.composite
def unrelated_line(draw) -> str:
    a, b = draw(identifiers), draw(identifiers)
    form = draw(st.integers(0, 7))
    line = [
        f"{a} = {draw(numbers)}",
        f"{a} = {draw(strings)}",
        f"{a}({b}, key={draw(strings)})",
        f"{a}.{b} = [{draw(numbers)}, {draw(numbers)}]",
        f"import {a}",
        f"from {a} import {b}",
        f"print(f'{{{a}}} on device {draw(words)}')",
        f"{a} = torch.zeros({draw(numbers)}).to('cpu')",
    ][form]
    return line + draw(comments)


@st.composite
def unrelated_module(draw) -> str:
    nl = draw(newlines)
    lines = ["import torch"] + draw(st.lists(unrelated_line(), min_size=1, max_size=25))
    return nl.join(lines) + nl


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unrelated_module())
def test_unrelated_code_is_never_touched(source):
    result = migrate_source("gen.py", source.encode(), ALL)
    assert result.error is None
    assert result.new_source is None
    assert result.fixes == [] and result.findings == []


CUDA_LINES = [
    "n = torch.cuda.device_count()",
    "torch.cuda.synchronize()",
    "y = x.cuda()",
    "dev = torch.device('cuda')",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unrelated_module(), st.sampled_from(CUDA_LINES), st.integers(min_value=1, max_value=30))
def test_lines_around_a_fix_are_byte_identical(source, cuda_line, where):
    nl = "\r\n" if source.endswith("\r\n") else "\n"
    lines = source.split(nl)
    where = min(where, len(lines) - 1)
    lines.insert(where, cuda_line)
    data = nl.join(lines).encode()
    result = migrate_source("gen.py", data, ALL)
    assert result.error is None
    out = (result.new_source or data).decode().split(nl)
    matcher = difflib.SequenceMatcher(a=lines, b=out, autojunk=False)
    removed = [lines[i] for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("replace", "delete") for i in range(i1, i2)]
    assert removed in ([], [cuda_line]), removed
    again = migrate_source("gen.py", nl.join(out).encode(), ALL)
    assert again.new_source is None


def _two_runs(paths):
    """The fixtures one after another, migrated, and the output migrated again:
    (input, first result, output, second result), or None when the mix is not valid
    Python (e.g. a fixture with `from __future__` concatenated after another one)."""
    data = b"\n".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in paths)
    try:
        ast.parse(data)
    except SyntaxError:
        return None
    first = migrate_source("mix.py", data, ALL)
    assert first.error is None, first.error
    output = first.new_source or data
    ast.parse(output)
    second = migrate_source("mix.py", output, ALL)
    assert second.error is None, second.error
    return data, first, output, second


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FIXTURES), min_size=1, max_size=4, unique=True))
# the same `import torch.cuda.amp as amp` in both: NPU301 once moved only the last
# one, so the next run saw two modules named `amp`, and NPU401 one GradScaler fewer
@example([RULE_FIXTURES / "NPU301/module_alias.before.py", RULE_FIXTURES / "NPU401/trainer_class.before.py"])
def test_any_mix_of_fixtures_converges_in_one_run(paths):
    runs = _two_runs(paths)
    if runs is not None:
        assert runs[3].new_source is None, "a second run changed the file again"


def _findings(result) -> list[tuple]:
    return sorted((f.line, f.col, f.end_line, f.end_col, f.rule, f.message, f.suggestion) for f in result.findings)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(AMP_AND_CHECKPOINT), min_size=1, max_size=4, unique=True))
# `from torch.cuda.amp import GradScaler, autocast` in both: the first import was left
# behind unreported, and the second run reported it
@example([RULE_FIXTURES / "NPU301/train_step.before.py", RULE_FIXTURES / "NPU401/optimizer_names.before.py"])
# `import torch_npu` moves every line down: NPU401's "(line 25)" moves with it
@example([RULE_FIXTURES / "NPU301/value_use.before.py", RULE_FIXTURES / "NPU401/optimizer_names.unchanged.py"])
# found by a search over all fixtures: NPU102 reported `torch.cuda.LongTensor(n).zero_`
# as a torch.cuda name, and lost it once NPU101 had renamed the LongTensor
@example([RULE_FIXTURES / "NPU101/legacy_types.before.py"])
# NPU502 reported a sampler with no epoch loop while adding `set_epoch` to another
# one; the written file calls `set_epoch`, so the next run said nothing
@example([RULE_FIXTURES / "NPU502/inline_conditional.before.py", RULE_FIXTURES / "NPU502/other_sampler.unchanged.py"])
# NPU401 read the optimizer state of the script's checkpoint dicts as going into a
# `torch.save(model, "model.pt")` beside them; once the run had added the scaler to
# those dicts, the next run said nothing
@example(
    [
        RULE_FIXTURES / "NPU301/device_generic.unchanged.py",
        RULE_FIXTURES / "NPU301/module_alias.before.py",
        RULE_FIXTURES / "NPU401/module_level_script.before.py",
        RULE_FIXTURES / "NPU402/whole_model.unchanged.py",
    ]
)
def test_any_mix_of_amp_and_checkpoint_fixtures_reports_the_same_findings_again(paths):
    runs = _two_runs(paths)
    if runs is not None:
        data, first, output, second = runs
        assert second.new_source is None
        assert _findings(second) == _findings(relocate(first, data, output))


def _rule_messages(result) -> Counter:
    return Counter((f.rule, f.message) for f in result.findings)


def _second_run_reports_the_same(name: str, data: bytes) -> None:
    first = migrate_source(name, data, ALL)
    assert first.error is None, first.error
    second = migrate_source(name, first.new_source or data, ALL)
    assert second.error is None, second.error
    lost, new = _rule_messages(first) - _rule_messages(second), _rule_messages(second) - _rule_messages(first)
    assert not lost and not new, f"lost on the second run: {sorted(lost)}; new: {sorted(new)}"


SOURCES = sorted(p for p in RULE_FIXTURES.glob("*/*.py") if not p.name.endswith(".after.py"))


@pytest.mark.parametrize("path", SOURCES, ids=[f"{p.parent.name}/{p.name}" for p in SOURCES])
def test_a_second_run_reports_the_same_findings(path):
    _second_run_reports_the_same(path.name, path.read_bytes())


def _bindings(tree: ast.Module) -> set[tuple[str, str]]:
    """(local name, what it is imported as) for every import of a module."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {(a.asname or a.name, f"{'.' * node.level}{node.module}.{a.name}") for a in node.names}
    return found


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SOURCES), min_size=2, max_size=4, unique=True))
# NPU501 reported a loader without set_epoch, then gave the next loader one: the written
# file calls set_epoch, so NPU502 on the next run said nothing
@example([RULE_FIXTURES / "NPU501/blank_line.before.py", RULE_FIXTURES / "NPU501/no_ddp.unchanged.py"])
# NPU510's `if npu_runtime.is_main_process():` around a save read as an NPU test (NPU010)
@example([RULE_FIXTURES / "NPU010/migrated_output.unchanged.py", RULE_FIXTURES / "NPU401/helper_not_in_scope.unchanged.py"])
# the CPU-path stand-in `rename_privateuse1_backend("npu")` read as a device list adding the NPU
@example([RULE_FIXTURES / "NPU104/registered_for_a_device.unchanged.py",
          RULE_FIXTURES / "NPU104/parameter_compared_with_its_default.before.py"])
# NPU510 shards a loader (and writes its set_epoch) in the file that holds another sampler
# NPU502 reports: the second run left that sampler to the written set_epoch (ci14, ci15)
@example([RULE_FIXTURES / "NPU502/other_sampler.unchanged.py", RULE_FIXTURES / "NPU001/noqa_suppresses.unchanged.py",
          RULE_FIXTURES / "NPU510/checkpoint_directory.before.py"])
# NPU610's moved import beside another rule's guard: the second run read the guards'
# `except` bodies (torch.profiler's names, the migration's CPU path) as uses to move again
@example([RULE_FIXTURES / "NPU001/noqa_suppresses.unchanged.py", RULE_FIXTURES / "NPU610/annotation_kept.before.py",
          RULE_FIXTURES / "NPU610/from_import.before.py"])
# NPU106's "also used on line N" moved with the guard the first run wrote above it
@example([RULE_FIXTURES / "NPU109/float64_tensors.unchanged.py",
          RULE_FIXTURES / "NPU106/name_list_keeps_the_variable.unchanged.py"])
def test_a_second_run_over_any_mix_reports_the_same_findings(paths):
    data = b"\n".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in paths)
    try:
        trees = [ast.parse(p.read_bytes()) for p in paths]
        ast.parse(data)
    except SyntaxError:
        return
    # A coherent module: no name imported as two different things by two fixtures.
    bound = [dict(_bindings(t)) for t in trees]
    names = [name for b in bound for name in b]
    assume(all(len({b[n] for b in bound if n in b}) == 1 for n in set(names)))
    _second_run_reports_the_same("mix.py", data)
