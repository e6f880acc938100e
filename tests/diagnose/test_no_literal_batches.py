"""A batch of log lines that holds no signature's literal costs no work per line (issue
38, round 6): the line starts of a batch are found only once a literal is in it, and a
read of blank lines is not measured line by line. 50 MB of empty lines took 12-15 s (the
starts of 50 million lines in a Python generator), now 3-4 s; the answers are the
line-by-line pass's (tests/diagnose/test_batched.py)."""

from __future__ import annotations

import io
import itertools

import pytest
from npu_runtime.diagnose import scan


@pytest.mark.timeout(60)
def test_line_starts_are_made_only_for_batches_holding_a_literal(monkeypatch):
    made = []

    class Counting:
        def __getattr__(self, name):
            return getattr(itertools, name)

        @staticmethod
        def accumulate(*args, **kwargs):
            made.append(1)
            return itertools.accumulate(*args, **kwargs)

    monkeypatch.setattr(scan, "itertools", Counting())
    blank = scan._LogLines(io.BufferedReader(io.BytesIO(b"\n" * (3 * scan.BATCH_CHARS) + b"epoch 1 done\n")), "blank.log")
    assert scan.diagnose_lines([("blank.log", blank)]) == []
    assert made == []
    nan = scan._LogLines(io.BufferedReader(io.BytesIO(b"\n" * 1000 + b"step 320 loss nan lr 3.0e-04\n")), "nan.log")
    found = scan.diagnose_lines([("nan.log", nan)])
    assert made and [d.line for d in found] == [1001]


@pytest.mark.timeout(60)
def test_reads_of_blank_lines_are_not_measured_line_by_line(monkeypatch):
    """``max(map(len, parts))`` over a read of a million empty lines is not needed: the
    read's characters that are not line ends bound every line but the first (cut already)."""
    measured = []
    real_max = max
    monkeypatch.setattr(scan, "max", lambda *a, **k: measured.append(1) or real_max(*a, **k), raising=False)
    lines = list(scan._LogLines(io.BufferedReader(io.BytesIO(b"\n" * (2 * scan.BATCH_CHARS))), "blank.log"))
    assert len(lines) == 2 * scan.BATCH_CHARS and measured == []
    long = b"x" * (scan.MAX_LINE + 10)
    cut = list(scan._LogLines(io.BufferedReader(io.BytesIO(b"a\n" + long + b"\nb\n" + long + b"\n")), "long.log"))
    assert cut == ["a", "x" * scan.MAX_LINE, "b", "x" * scan.MAX_LINE]
