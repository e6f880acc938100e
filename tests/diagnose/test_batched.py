"""diagnose matches lines in batches (issue 38 item 3, adversarial round 5): the same
diagnoses as a line-by-line pass over the table, and time per megabyte bounded on logs
of many short lines (50 MB of empty lines took minutes in the per-line loop: about
3.5 us a line, 18 s for 5 MB)."""

from __future__ import annotations

import io
import random
import time

import pytest
from npu_runtime.diagnose import SIGNATURES, scan

from .excerpts import EXCERPTS, HEALTHY


def _reference(named_lines):
    """The line-by-line pass the batches must agree with (the code before round 5)."""
    found, order, seen = {}, {}, 0
    for name, lines in named_lines:
        for number, raw in enumerate(lines, start=1):
            line = raw[:scan.MAX_LINE]
            matched = None
            for signature in SIGNATURES:
                for regex in signature.regexes:  # the plain regexes, not the linear matchers
                    if signature is matched:
                        break
                    if not regex.search(line):
                        continue
                    matched = signature
                    known = found.get(signature.id)
                    if known is None:
                        found[signature.id] = scan.Diagnosis(signature, name, number, scan._evidence(line))
                        order[signature.id] = seen
                        seen += 1
                    else:
                        known.count += 1
                        if name != known.file and name not in known.also_in and len(known.also_in) < 20:
                            known.also_in.append(name)
    return sorted(found.values(), key=lambda d: (d.signature.rank, order[d.signature.id]))


def _pool() -> list[str]:
    pool = [line for excerpts in EXCERPTS.values() for text in excerpts for line in text.splitlines()]
    return pool + [line for text in HEALTHY for line in text.splitlines()]


def _lines_as_read(data: str) -> list[str]:
    """``data``'s lines as the old reader yielded them (universal line ends, cut at MAX_LINE)."""
    out = []
    for line in io.StringIO(data, newline=None):
        out.append(line[:scan.MAX_LINE])
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("batch_chars", [7, 5000, 1 << 20])
def test_batches_give_what_the_line_by_line_pass_gives(tmp_path, monkeypatch, batch_chars):
    monkeypatch.setattr(scan, "BATCH_CHARS", batch_chars)
    rnd = random.Random(batch_chars)
    pool = _pool()
    for trial in range(15):
        parts = []
        for _ in range(rnd.randint(0, 40)):
            r = rnd.random()
            line = rnd.choice(pool)
            if r < 0.1:
                line = "x" * rnd.randint(60_000, 140_000) + line  # past MAX_LINE: the signature is cut off
            elif r < 0.2:
                line = line + " " * rnd.randint(60_000, 70_000)
            elif r < 0.3:
                line = "\u0130" * rnd.randint(1, 3) + line  # lower case longer than the character
            elif r < 0.4:
                line = ""
            parts.append(line + rnd.choice(["\n", "\r\n", "\r"]))
        data = "".join(parts)
        if trial % 2:
            data = data.rstrip("\r\n")
        path = tmp_path / f"t{trial}.log"
        path.write_bytes(data.encode())
        got = [d.as_dict() for d in scan.diagnose_paths([str(path), str(path)])]
        want = [d.as_dict() for d in _reference([(str(path), _lines_as_read(data))] * 2)]
        assert got == want, trial
        # the plain iterable path (crash_class gives lines, some holding line ends of their own)
        lines = data.splitlines(keepends=True)
        got = [d.as_dict() for d in scan.diagnose_lines([("x", lines), ("y", ["\n".join(lines)])])]
        want = [d.as_dict() for d in _reference([("x", lines), ("y", ["\n".join(lines)])])]
        assert got == want, trial


def _units() -> list[str]:
    units = ["", "a"]
    for signature in SIGNATURES:
        for literal in signature.literals:
            if literal:
                units.append(literal[0])
    units = list(dict.fromkeys(units))
    # every literal, one per line, in turn: each check runs on every batch (round 5 broke here:
    # 50 MB took over 60 s when every regex scanned every batch)
    return [*units, "\n".join(units[2:])]


#: Seconds per megabyte a log of short lines may take, on a loaded 2-core machine
#: (measured here: at most 0.5; the per-line loop took 3.6 for empty lines).
PER_MB_S = 2.0


@pytest.mark.timeout(600)
def test_short_lines_holding_every_literal_take_bounded_time_per_megabyte():
    size = 1 << 20
    worst, worst_unit = 0.0, None
    for unit in _units():
        data = ((unit + "\n") * (size // (len(unit) + 1) + 1))[:size].encode()
        start = time.perf_counter()
        scan.diagnose_lines([("x.log", scan._lines(io.BufferedReader(io.BytesIO(data)), "x.log"))])
        elapsed = time.perf_counter() - start
        if elapsed > worst:
            worst, worst_unit = elapsed, unit
    assert worst < PER_MB_S, f"{worst:.2f} s per MB on lines of {worst_unit!r}"
