"""``--annotate``: one ``# npu-migrate: NPUxxx ...`` comment above each statement with a finding."""

from __future__ import annotations

import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

SELECT = ["NPU9", "NPU102"]
ANNOTATION = re.compile(r"^(?P<indent>[ \t]*)# npu-migrate: (?P<rule>NPU\d{3}) ")


def run(source: str | bytes, select=SELECT, annotate: bool = True):
    data = source.encode() if isinstance(source, str) else source
    result = migrate_source("train.py", data, Settings(selection=Selection.create(select), annotate=annotate))
    assert result.error is None, result.error
    return result


def annotated(source: str, select=SELECT) -> str:
    result = run(source, select)
    assert result.new_source is not None, "expected annotations"
    return result.new_source.decode()


def annotations(text: str) -> list[tuple[int, str, str]]:
    """(line, indentation, rule) of every annotation comment."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = ANNOTATION.match(line)
        if match:
            out.append((number, match.group("indent"), match.group("rule")))
    return out


NESTED = """\
import torch
import torch.nn as nn


class Trainer:
    def setup(self, model):
        if self.parallel:
            for _ in range(self.retries):
                model = nn.DataParallel(model)
        return torch.compile(model)
"""


def test_comment_goes_right_above_the_statement_with_its_indentation():
    text = annotated(NESTED)
    lines = text.splitlines()
    found = annotations(text)
    assert [(indent, rule) for _, indent, rule in found] == [(" " * 16, "NPU913"), (" " * 8, "NPU914")]
    for number, _, _ in found:
        below = lines[number]  # the line after the comment (numbers are 1-based)
        assert "DataParallel(" in below or "torch.compile(" in below
        assert below.startswith(ANNOTATION.match(lines[number - 1]).group("indent"))
        assert not below.lstrip().startswith("#")
    ast.parse(text)
    # nothing but comments was added
    assert [line for line in lines if not ANNOTATION.match(line)] == NESTED.splitlines()


def test_comment_carries_the_finding_message():
    result = run(NESTED, annotate=False)
    text = annotated(NESTED)
    for finding in result.findings:
        assert f"# npu-migrate: {finding.rule} {finding.message}" in text


def test_second_run_changes_nothing():
    once = annotated(NESTED)
    again = run(once)
    assert again.new_source is None
    assert {f.rule for f in again.findings} == {"NPU913", "NPU914"}


def test_first_statement_of_the_file_is_annotated_once():
    """Comments above the first statement are parsed into the module header."""
    source = "import flash_attn\nimport torch\n"
    once = annotated(source)
    assert once.startswith("# npu-migrate: NPU901 ")
    assert run(once).new_source is None
    assert run(run(once).new_source or once.encode()).new_source is None


def test_without_annotate_nothing_is_written():
    result = run(NESTED, annotate=False)
    assert result.new_source is None
    assert len(result.findings) == 2


def test_crlf_line_endings_are_kept():
    source = NESTED.replace("\n", "\r\n").encode()
    result = run(source)
    assert result.new_source is not None
    new = result.new_source
    assert new.count(b"\r\n") == new.count(b"\n"), "a bare LF was introduced"
    assert new.count(b"\r\n") == source.count(b"\r\n") + 2
    assert run(new).new_source is None


COMPOUND = """\
import torch
import torch.nn as nn


def build(model, mode):
    if mode == "plain":
        pass
    elif isinstance(torch.compile(model), nn.Module):
        pass
    with torch.cuda.nvtx.range("build"):
        model = model.float()
    for replica in [nn.DataParallel(model)]:
        pass
    while torch.compile(model) is None:
        break
    return model


@torch.compile
def step(x):
    return x


if model: model = nn.DataParallel(model)
"""


def test_findings_in_compound_statement_headers_annotate_the_header():
    text = annotated(COMPOUND)
    lines = text.splitlines()
    ast.parse(text)
    headers = {number: lines[number].strip() for number, _, _ in annotations(text)}
    assert sorted(headers.values()) == sorted(
        [
            "elif isinstance(torch.compile(model), nn.Module):",
            'with torch.cuda.nvtx.range("build"):',
            "for replica in [nn.DataParallel(model)]:",
            "while torch.compile(model) is None:",
            "@torch.compile",
            "if model: model = nn.DataParallel(model)",
        ]
    )
    for number, indent, _ in annotations(text):
        header = lines[number]
        assert header[: len(header) - len(header.lstrip())] == indent
    assert run(text).new_source is None


def test_two_findings_on_one_statement_give_two_comments_once():
    source = "import torch\nimport torch.nn as nn\nm = nn.DataParallel(torch.compile(model))\n"
    text = annotated(source)
    assert [rule for _, _, rule in annotations(text)] == ["NPU913", "NPU914"]
    assert run(text).new_source is None


def test_same_finding_twice_on_a_statement_gives_one_comment():
    source = "import torch.nn as nn\nm = [nn.DataParallel(a), nn.DataParallel(b)]\n"
    assert [rule for _, _, rule in annotations(annotated(source))] == ["NPU913"]


def test_suppressed_finding_gets_no_comment():
    source = (
        "import torch.nn as nn\n"
        "a = nn.DataParallel(a)  # npu-migrate: ignore\n"
        "b = nn.DataParallel(b)  # npu-migrate: ignore[NPU913]\n"
        "c = nn.DataParallel(c)  # npu-migrate: ignore[NPU2]\n"
    )
    text = annotated(source)
    assert [(number, rule) for number, _, rule in annotations(text)] == [(4, "NPU913")]
    assert text.splitlines()[4].startswith("c = ")


def test_npu_aware_branch_gets_no_comment():
    source = (
        "import torch\n"
        "if is_torch_npu_available():\n"
        "    model = torch.compile(model, backend='npu')\n"
        "else:\n"
        "    model = torch.compile(model)\n"
    )
    result = run(source, select=["NPU914", "NPU010"])
    assert [f.rule for f in result.findings] == ["NPU010"]
    assert result.new_source is None


def test_annotations_coexist_with_fixes():
    source = "import torch\nimport torch.nn as nn\n\ntorch.cuda.synchronize()\nmodel = nn.DataParallel(model)\n"
    result = run(source, select=["NPU1", "NPU913"])
    text = result.new_source.decode()
    assert "torch.npu.synchronize()" in text
    assert [rule for _, _, rule in annotations(text)] == ["NPU913"]
    assert all(f.rule != "annotate:" for f in result.fixes)
    assert run(text, select=["NPU1", "NPU913"]).new_source is None


@pytest.mark.parametrize(
    "source",
    [
        "import torch.nn as nn\nmatch cmd:\n    case 'dp':\n        m = nn.DataParallel(m)\n",
        "import torch.nn as nn\nif (m := nn.DataParallel(m)):\n    pass\n",
        "import torch.nn as nn\nf = lambda m: nn.DataParallel(m)\n",
        "import torch.nn as nn\ndef outer():\n    def inner(*a, **k):\n        return nn.DataParallel(*a, **k)\n    return inner\n",
        "import torch.nn as nn\nclass A:\n    x = [nn.DataParallel(m) for m in ms]\n",
        "import torch.nn as nn\ntry:\n    m = nn.DataParallel(m)\nexcept RuntimeError:\n    pass\nfinally:\n    pass\n",
    ],
    ids=["match", "walrus", "lambda", "nested-def", "comprehension", "try"],
)
def test_odd_but_valid_code(source):
    text = annotated(source)
    ast.parse(text)
    assert len(annotations(text)) == 1
    assert run(text).new_source is None


STATEMENTS = st.sampled_from(
    [
        "m = nn.DataParallel(m)",
        "x = 1",
        "m = torch.compile(m)",
        "pass",
        "y = torch.ones(2)",
    ]
)


@st.composite
def programs(draw):
    """Random nestings of blocks holding statements with and without findings."""
    lines = ["import torch", "import torch.nn as nn"]
    depth = 0
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["stmt", "stmt", "open", "close"]))
        pad = "    " * depth
        if kind == "open" and depth < 4:
            lines.append(pad + draw(st.sampled_from(["if cond:", "for i in r:", "with ctx:", "def f():", "while t:"])))
            depth += 1
            lines.append("    " * depth + draw(STATEMENTS))
        elif kind == "close" and depth > 0:
            depth -= 1
            lines.append("    " * depth + draw(STATEMENTS))
        else:
            lines.append(pad + draw(STATEMENTS))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + newline


@settings(max_examples=30, deadline=None)
@given(programs())
def test_annotate_is_idempotent_and_only_adds_comments(source):
    first = run(source)
    expected = {f.line for f in first.findings}
    if not expected:
        assert first.new_source is None
        return
    text = first.new_source.decode()
    ast.parse(text)
    original = source.splitlines()
    assert [line for line in text.splitlines() if not ANNOTATION.match(line)] == original
    # one comment per statement with findings (different rules may share a line)
    assert len(annotations(text)) == len({(f.line, f.rule) for f in first.findings})
    assert run(text).new_source is None


def test_annotations_carry_the_suggestion(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(b"import torch\ntorch.cuda.nvtx.range_push('a')\n")
    (tmp_path / "run.sh").write_bytes(b"#!/bin/sh\nexport NCCL_IB_DISABLE=1\n")
    run_cli(".", "--no-cache", "--write", "--annotate")
    py = (tmp_path / "train.py").read_text().splitlines()
    note = next(line for line in py if line.startswith("# npu-migrate: NPU102 "))
    assert "; suggestion: " in note
    sh = (tmp_path / "run.sh").read_text().splitlines()
    assert any(line.startswith("# npu-migrate: NPU") and "; suggestion: " in line for line in sh)
    # a second run adds nothing
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    run_cli(".", "--no-cache", "--write", "--annotate")
    assert {p: p.read_bytes() for p in before} == before
