"""diagnose takes time linear in the log's size on any line (issue 38 item 3): every
signature's patterns against long adversarial lines built from the pattern's own
words, repeated, with and without separators, and with the last part missing (the
shape that makes ``A.*B.*C`` backtrack: a 60 KB line of ``torch_npu requires`` took
3 s before, a 1.4 MB log did not finish in 60 s)."""

from __future__ import annotations

import re
import time

import pytest

from npu_runtime.diagnose import SIGNATURES, diagnose_lines
from npu_runtime.diagnose.scan import MAX_LINE

#: Seconds one MAX_LINE (64 KB) line may take against one signature, on a loaded
#: 2-core machine (measured: under 0.07 s; the quadratic patterns took 20-25 s).
PER_LINE_S = 1.0


def _words(pattern: str) -> list[str]:
    text = re.sub(r"\\[bsdwBSDW]|\(\?[i:!=<]+|\\", " ", pattern)
    found = re.findall(r"[A-Za-z_][A-Za-z_ ]*[A-Za-z_]|[A-Za-z_]{1,2}|\d{3,}|[:=\"'\[\]\(\)>.-]", text)
    out: list[str] = []
    for word in found:
        for piece in (word, *word.split()):
            if piece not in out:
                out.append(piece)
    return out


def _units(pattern: str) -> list[str]:
    words = _words(pattern)
    units = []
    for sep in (" ", "", ":", "  ", " x "):
        for k in range(1, len(words) + 1):
            units.append(sep.join(words[:k]) + sep)  # the first k words: all but the rest
        units += [w + sep for w in words]
    units += [a + " " + b + " " + b + " " for a in words for b in words]
    return list(dict.fromkeys(units))


CASES = [(s, pattern) for s in SIGNATURES for pattern in s.patterns]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("signature", "pattern"), CASES, ids=[f"{s.id}-{i}" for i, (s, _) in enumerate(CASES)])
def test_every_pattern_is_linear_on_adversarial_lines(signature, pattern):
    worst, worst_unit = 0.0, None
    for unit in _units(pattern):
        line = (unit * (MAX_LINE // max(1, len(unit)) + 1))[:MAX_LINE]
        start = time.perf_counter()
        diagnose_lines([("x.log", [line])], [signature])
        elapsed = time.perf_counter() - start
        if elapsed > worst:
            worst, worst_unit = elapsed, unit
    for word in _words(pattern):  # one word, then a long run of one character (\s*\s*-style backtracking)
        for filler in (" ", "0", "a", ":", "[", "="):
            line = (word + filler * MAX_LINE)[:MAX_LINE]
            start = time.perf_counter()
            diagnose_lines([("x.log", [line])], [signature])
            elapsed = time.perf_counter() - start
            if elapsed > worst:
                worst, worst_unit = elapsed, word + filler + "..."
    assert worst < PER_LINE_S, f"{signature.id}: {pattern!r} took {worst:.2f} s on a 64 KB line of {worst_unit!r}"


@pytest.mark.timeout(120)
def test_the_reported_log_is_diagnosed_in_bounded_time():
    """The attack of issue 38: 1.4 MB of 60 KB lines holding torch_npu and many `requires`."""
    line = "torch_npu " + "requires " * 6600 + "\n"
    start = time.perf_counter()
    diagnose_lines([("big.log", [line] * 24)])
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize("text", [
    "RuntimeError: torch_npu 2.1.0 requires torch 2.1.0, but 2.3.1 is installed",
    "ImportError: libtorch_npu.so: undefined symbol: _ZN3c1010npu_foo (torch_npu)",
    "E39999: store->get('rank0') got error: Socket Timeout",
    "OSError: libhccl.so.1.2: cannot open shared object file: No such file or directory",
])
def test_the_rewritten_patterns_still_match(text):
    assert diagnose_lines([("x.log", [text])])


#: Seconds a 2 MB line may take through the file reader, per signature (measured: about
#: 0.1 s; each line is matched on its first MAX_LINE characters, the rest read and dropped).
PER_2MB_LINE_S = 3.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signature", SIGNATURES, ids=[s.id for s in SIGNATURES])
def test_a_2_mb_line_of_each_signatures_first_words_is_read_in_bounded_time(tmp_path, signature):
    """Per signature, a 2 MB line cycling through the first words of each of its patterns
    without the last (``torch_npu requires requires ...``: the backtracking shape), then a
    line of another signature: the whole table reads the file in bounded time and still
    finds the line after the long one."""
    from npu_runtime.diagnose import diagnose_paths

    from .excerpts import EXCERPTS

    units = []
    for pattern in signature.patterns:
        words = _words(pattern)
        units.append(" ".join(words[:-1] or words) + " " + " ".join(words[1:-1] or words) + " ")
    unit = "".join(units)
    line = (unit * ((2 << 20) // len(unit) + 1))[:2 << 20]
    log = tmp_path / "rank0.log"
    after = "hccl-exec-timeout" if signature.id == "npu-oom" else "npu-oom"
    log.write_text(line + "\n" + EXCERPTS[after][0], encoding="utf-8")
    start = time.perf_counter()
    found = {d.signature.id: d.line for d in diagnose_paths([str(log)])}
    elapsed = time.perf_counter() - start
    assert found.get(after) == 2, found
    assert elapsed < PER_2MB_LINE_S, f"{signature.id}: {elapsed:.2f} s"
