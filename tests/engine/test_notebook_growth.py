"""Work per cell of a notebook, and per changed place of a diff, stays constant
(issue 29: 1000 cells took 10 s, 2000 cells 29 s). No timing here: the tests count
what used to be done once per cell over the whole notebook. The timed growth
check is ``bench/notebook_growth.py``."""

from __future__ import annotations

import difflib
import json
import random

from npu_migrate.cli import output
from npu_migrate.notebooks import cells, layout
from npu_migrate.notebooks.engine import migrate
from npu_migrate.pipeline.settings import Settings


def notebook(count: int) -> bytes:
    sources = [["import torch\n", "x = torch.zeros(1)\n", "x = x.cuda()\n"]]
    sources += [[f"y{i} = x + {i}\n", f"y{i} = y{i}.cuda()\n"] for i in range(1, count)]
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": source} for source in sources],
                       "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
                       "nbformat": 4, "nbformat_minor": 4}, indent=1).encode()


def test_the_whole_file_is_read_for_its_json_style_once_however_many_cells_change(monkeypatch):
    calls = []
    real = layout.ascii_style
    monkeypatch.setattr(layout, "ascii_style", lambda data: calls.append(1) or real(data))
    result = migrate("n.ipynb", notebook(40), Settings())
    assert result.error is None
    assert b"y39 = y39.npu()" in result.new_source and b"x = x.npu()" in result.new_source
    assert len(calls) == 1


def test_locating_a_line_does_not_scan_every_cell(monkeypatch):
    joined = cells.join({i: f"a{i} = 1\nb{i} = 2\n" for i in range(0, 400, 2)})
    brute = {}
    for line in range(1, len(joined.source.splitlines()) + 2):
        found = None
        for cell, start in joined.starts.items():
            if start <= line:
                found = (cell, line - start + 1)
        brute[line] = found
    # the cell table is not walked per call: a dict that counts its iterations says so
    walked = []

    class Counting(dict):
        def items(self):
            walked.append(1)
            return super().items()

    joined.starts = Counting(joined.starts)
    assert {line: joined.locate(line) for line in brute} == brute
    assert len(walked) <= 1  # once, to build the sorted index


def test_a_large_diff_is_matched_stretch_by_stretch_between_unique_lines(monkeypatch):
    random.seed(7)
    old = [b"    same\n" if i % 3 else b"line %d\n" % i for i in range(6000)]
    new = list(old)
    for at in range(5, 6000, 40):
        new[at] = b"changed %d\n" % at
    seen = []
    real = difflib.SequenceMatcher

    class Recording(real):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            seen.append(len(a) + len(b))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(output.difflib, "SequenceMatcher", Recording)
    text = output.unified_diff("f.txt", b"".join(old), b"".join(new)).decode()
    # every stretch handed to difflib is short: work grows with the file, not with file x changes
    assert max(seen[1:]) < 20
    assert text.count("\n-changed") == 0 and text.count("\n+changed") == len(range(5, 6000, 40))
    # and the opcodes rebuild the new file from the old one
    matcher = output.AnchoredMatcher(None, old, new)
    rebuilt = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        rebuilt.extend(old[i1:i2] if tag == "equal" else new[j1:j2])
    assert rebuilt == new


def test_a_large_diff_applies_like_difflibs(tmp_path):
    """Hunks of the anchored diff, applied by hand, give the new file (random edits)."""
    random.seed(3)
    for _ in range(4):
        old = [random.choice([b"a\n", b"b\n", b"%d\n" % random.randint(0, 2000)]) for _ in range(2100)]
        new = list(old)
        for _ in range(random.randint(1, 50)):
            at = random.randrange(len(new))
            choice = random.random()
            if choice < 0.3:
                del new[at]
            elif choice < 0.6:
                new.insert(at, b"inserted\n")
            else:
                new[at] = b"b\n"
        patch = output.unified_diff("f", b"".join(old), b"".join(new)).decode().splitlines(keepends=True)[2:]
        assert _apply(old, patch) == new


def _apply(old: list[bytes], patch: list[str]) -> list[bytes]:
    out, at = [], 0
    for line in patch:
        if line.startswith("@@"):
            start = int(line.split()[1][1:].split(",")[0])
            length = line.split()[1].split(",")
            start = start - 1 if len(length) == 1 or length[1] != "0" else start
            out.extend(old[at:start])
            at = start
        elif line.startswith(" "):
            assert old[at] == line[1:].encode()
            out.append(old[at])
            at += 1
        elif line.startswith("-"):
            assert old[at] == line[1:].encode()
            at += 1
        elif line.startswith("+"):
            out.append(line[1:].encode())
    return out + old[at:]
