"""Positions users can act on: after ``--write`` (and in stdin mode) fixes and findings
name lines and columns of the file as written, not as it was read."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.model import FileResult, Finding
from npu_migrate.python.engine import migrate_source
from npu_migrate.reporting.relocate import PositionMap, relocate

from ..rules.golden import cases


def _findings(result: FileResult) -> set[tuple]:
    return {(f.line, f.col, f.end_line, f.end_col, f.rule, f.message) for f in result.findings}


def test_relocated_findings_are_where_a_run_on_the_output_finds_them():
    """For every golden fixture that changes and reports, the first run's findings,
    moved to the written file, are exactly where a second run over that file puts
    them (a finding the second run no longer reports is not compared)."""
    compared = 0
    for case in cases():
        if case.after is None:
            continue
        data = case.before.read_bytes()
        first = migrate_source("x.py", data, case.settings())
        if first.new_source is None or not first.findings:
            continue
        moved = _findings(relocate(first, data, first.new_source))
        again = _findings(migrate_source("x.py", first.new_source, case.settings()))
        assert again <= moved, case.id
        compared += len(again)
    assert compared >= 10


SOURCE = (
    b"import torch\n"
    b"\n"
    b"def step(x):\n"
    b"    y = x.cuda(); torch.cuda.nvtx.range_push('step')\n"
    b"    return torch.cuda.device_count()\n"
)


def test_a_finding_after_a_rewrite_on_the_same_line_keeps_its_text():
    result = migrate_source("a.py", SOURCE)
    (finding,) = [f for f in result.findings if f.rule == "NPU102"]
    old_line = SOURCE.decode().splitlines()[finding.line - 1]
    moved = relocate(result, SOURCE, result.new_source)
    (after,) = [f for f in moved.findings if f.rule == "NPU102"]
    new_line = result.new_source.decode().splitlines()[after.line - 1]
    assert after.line == finding.line + 5  # below the inserted guard around `import torch_npu` (6 lines)
    assert new_line[after.col:after.end_col] == old_line[finding.col:finding.end_col] \
        == "torch.cuda.nvtx.range_push"
    assert after.col == finding.col - 1  # `x.cuda()` became `x.npu()` before it


def test_fix_spans_cover_the_replacement():
    result = migrate_source("a.py", SOURCE)
    moved = relocate(result, SOURCE, result.new_source)
    lines = result.new_source.decode().splitlines()
    spans = {f.rule: lines[f.line - 1][f.col:f.end_col] for f in moved.fixes if f.line == f.end_line}
    assert spans["NPU101"] == "torch.npu.device_count"
    assert spans["NPU103"] == "x.npu"


def test_unchanged_file_keeps_its_positions():
    result = FileResult("a.py", findings=[Finding(2, 3, "NPU102", "m", "s", 2, 9)])
    assert relocate(result, b"a\nbcdefghij\n", b"a\nbcdefghij\n") is result


def test_a_cited_line_moves_with_the_file():
    """"created only later (line 4)" names the written file's line too; quoted code
    is the user's text and keeps its numbers."""
    finding = Finding(3, 0, "NPU401", "`s` is created only later (line 4)", "move line 4 above line 3; `line 2` stays", 3, 1)
    moved = relocate(FileResult("a.py", findings=[finding]), b"a\nb\nc\nd\n", b"a\nnew\nb\nc\nd\n")
    (after,) = moved.findings
    assert (after.line, after.message) == (4, "`s` is created only later (line 5)")
    assert after.suggestion == "move line 5 above line 4; `line 2` stays"


def test_crlf_and_form_feed_count_lines_as_python_does():
    old = "import torch\r\nx = 1\r\n\x0cy = torch.cuda.nvtx\r\n"
    new = "import torch\r\nimport torch_npu\r\nx = 1\r\n\x0cy = torch.cuda.nvtx\r\n"
    mapping = PositionMap(old, new)
    assert mapping.position(3, 5) == (4, 5)  # \f does not start a line; \r\n is one break


def test_positions_at_the_end_of_the_file():
    mapping = PositionMap("a\nb\n", "x\na\nb\n")
    assert mapping.position(3, 0) == (4, 0)  # the empty last "line" after the final newline
    assert mapping.position(2, 1, end=True) == (3, 1)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_untouched_lines_map_exactly(data):
    """Any mix of inserted, deleted and rewritten lines: every line that survives
    unchanged maps to where it is in the new text, column for column."""
    count = data.draw(st.integers(1, 25))
    old = [f"line_{i} = value_{i}" for i in range(count)]
    new, origin = [], {}
    for i, line in enumerate(old):
        for k in range(data.draw(st.integers(0, 2))):
            new.append(f"inserted_{i}_{k}()")
        action = data.draw(st.sampled_from(["keep", "keep", "delete", "rewrite"]))
        if action == "keep":
            origin[i] = len(new)
            new.append(line)
        elif action == "rewrite":
            new.append(line.replace("value", "other_value"))
    mapping = PositionMap("\n".join(old), "\n".join(new))
    for i, j in origin.items():
        col = data.draw(st.integers(0, len(old[i])))
        assert mapping.position(i + 1, col) == (j + 1, col)


def _cli_json(run_cli, *args) -> dict:
    result = run_cli(*args, "--no-cache", "--output-format", "json", "--output-file", "r.json")
    assert result.exit_code == 0, result.output
    return result


def test_write_reports_lines_of_the_written_file(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(SOURCE)
    dry = run_cli(".", "--no-cache", "--report", "dry.json")
    assert "train.py:4:19: NPU102" in dry.output  # the file on disk is the original
    # the reports this test leaves in the tree are config files to later runs: kept out
    written = run_cli(".", "--no-cache", "--write", "--report", "w.json", "--extend-exclude", "*.json")
    assert "train.py:9:18: NPU102" in written.output  # the file on disk has the guarded `import torch_npu` now
    lines = (tmp_path / "train.py").read_text().splitlines()
    assert lines[8][17:].startswith("torch.cuda.nvtx.range_push")
    report = json.loads((tmp_path / "w.json").read_text())
    (entry,) = report["files"]
    assert entry["written"] is True and all(f["applied"] for f in entry["fixes"])
    (finding,) = [f for f in entry["findings"] if f["rule"] == "NPU102"]
    assert finding["start"] == {"line": 9, "column": 18} and finding["end"] == {"line": 9, "column": 44}
    dry_finding = next(f for f in json.loads((tmp_path / "dry.json").read_text())["files"][0]["findings"]
                       if f["rule"] == "NPU102")
    assert dry_finding["start"] == {"line": 4, "column": 19}
    # and a check of the written file agrees
    check = run_cli(".", "--no-cache", "--check", "--report", "c.json", "--extend-exclude", "*.json")
    assert "train.py:9:18: NPU102" in check.output
    assert json.loads((tmp_path / "c.json").read_text())["files"][0]["findings"] == entry["findings"]


def test_annotate_write_points_below_the_inserted_comment(tmp_path, run_cli):
    (tmp_path / "a.py").write_bytes(b"import torch\nx = 1\ntorch.cuda.nvtx.range_push('a')\n")
    result = run_cli("a.py", "--no-cache", "--write", "--annotate")
    lines = (tmp_path / "a.py").read_text().splitlines()
    assert lines[2].startswith("# npu-migrate: NPU102") and lines[3].startswith("torch.cuda.nvtx")
    assert "a.py:4:1: NPU102" in result.output


def test_positions_in_cells_move_with_their_own_cell():
    """A front end whose files hold several sources (notebook cells) gives each
    part's text; a finding in cell 2 moves by what changed in cell 2 only."""
    def cells(data: bytes) -> dict:
        return {i + 1: part for i, part in enumerate(data.decode().split("\n---\n"))}

    old = b"import torch\nx = 1\n---\ny = torch.cuda.nvtx\n"
    new = b"import torch\nimport torch_npu\nx = 1\n---\n# npu-migrate: NPU102\ny = torch.cuda.nvtx\n"
    result = FileResult("nb.fake", findings=[Finding(1, 4, "NPU102", "m", "s", 1, 19, cell=2),
                                             Finding(2, 0, "NPU999", "m", "s", 2, 5)])
    moved = relocate(result, old, new, split=cells)
    assert moved.findings[0].line == 2 and moved.findings[0].col == 4 and moved.findings[0].cell == 2
    assert moved.findings[1] == result.findings[1]  # no part without a cell: left alone


# --------------------------------------------------------------------------- cost (issue 29)


def _timed_relocation(old: bytes, new: bytes, positions: list[tuple[int, int]]) -> tuple[float, object]:
    import time

    from npu_migrate.pipeline.model import FileResult, Fix
    from npu_migrate.reporting.relocate import relocate

    fixes = [Fix(line, col, "NPU101", "m", line, col + 4) for line, col in positions]
    start = time.perf_counter()
    moved = relocate(FileResult(path="a.py", fixes=fixes), old, new)
    return time.perf_counter() - start, moved


@pytest.mark.timeout(120)
def test_relocation_of_identical_lines_is_linear():
    def case(n):
        old = b"import torch\n" + b"torch.cuda.synchronize()\n" * n
        new = b"import torch\nimport torch_npu\n" + b"torch.npu.synchronize()\n" * n
        return _timed_relocation(old, new, [(line, 6) for line in range(2, n + 2)])

    small, _ = case(5_000)
    large, moved = case(20_000)
    assert large < 30 and large < 8 * small + 1, (small, large)  # 4x the lines: about 4x the time
    assert [(f.line, f.col) for f in moved.fixes[:3]] == [(3, 6), (4, 6), (5, 6)]
    assert (moved.fixes[-1].line, moved.fixes[-1].end_col) == (20_002, 9)


@pytest.mark.timeout(120)
def test_relocation_in_one_long_json_line_is_fast_and_exact():
    import json

    old = json.dumps({f"k{i}": {"device": "cuda", "backend": "nccl"} for i in range(700)}).encode()
    new = old.replace(b'"cuda"', b'"npu"').replace(b'"nccl"', b'"hccl"')
    cols = [m.start() + 1 for m in __import__("re").finditer(rb'"cuda"', old)]
    took, moved = _timed_relocation(old, new, [(1, col) for col in cols])
    assert took < 10, took
    expected = [m.start() + 1 for m in __import__("re").finditer(rb'"npu"', new)]
    assert [f.col for f in moved.fixes] == expected
