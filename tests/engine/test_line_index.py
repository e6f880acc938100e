"""Many fixes on one long line cost linear time (issue 38 item 4): a README's shell fence
(or a shell script) holding one command line of 37,000 ``--device cuda`` fixes decoded the
line from its start for each fix's column (``LineIndex.position``), and the Markdown
front end sliced the rest of the line for each (``_start``): quadratic, minutes at the
4 MB a README may have. Same columns as before."""

from __future__ import annotations

import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from npu_migrate.markdown import engine as markdown
from npu_migrate.pipeline.edits import LineIndex


def _decoded_from_line_start(data: bytes, offset: int) -> tuple[int, int]:
    index = LineIndex(data)
    line = index.line(offset)
    return line, len(data[index.line_start(line):offset].decode("utf-8", errors="replace"))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=60) | st.text(max_size=30).map(str.encode), order=st.randoms(use_true_random=False),
       sort=st.booleans())
@example(data="é\xe9x\n\xff".encode("latin-1") + "日本".encode(), order=None, sort=True)
def test_position_is_the_column_of_the_decoded_line_prefix(data, order, sort):
    offsets = list(range(len(data) + 1)) * 2
    if sort:
        offsets.sort()
    elif order is not None:
        order.shuffle(offsets)
    index = LineIndex(data)
    for offset in offsets:
        assert index.position(offset) == _decoded_from_line_start(data, offset), (data, offset)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("unit", ["--device cuda ", "--device cuda é "])
def test_many_positions_on_one_long_line_cost_linear_time(unit):
    """40,000 positions in file order on a 1 MB line (ASCII, or not): the old decode from the
    line's start took seconds here (20 GB decoded), minutes at a few MB."""
    data = (unit * ((1 << 20) // len(unit))).encode() + b"\n"
    offsets = range(0, len(data), len(data) // 40_000)
    index = LineIndex(data)
    start = time.perf_counter()
    columns = [index.position(offset) for offset in offsets]
    elapsed = time.perf_counter() - start
    assert columns[-1] == _decoded_from_line_start(data, offsets[-1])
    assert elapsed < 1.0, f"{elapsed:.2f} s"


def _old_start(lines: list[str], line: int, col: int) -> tuple[int, int]:
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if text[col:].strip() in ("\\", "") and line < len(lines):
        following = lines[line]
        return line + 1, len(following) - len(following.lstrip())
    return line, col + len(text[col:]) - len(text[col:].lstrip())


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.text(alphabet=" \t\\x-\u3000", max_size=8), min_size=1, max_size=3),
       line=st.integers(0, 4), col=st.integers(0, 10))
def test_where_a_fix_starts_is_unchanged(lines, line, col):
    assert markdown._start(lines, line, col) == _old_start(lines, line, col)


@pytest.mark.timeout(120)
def test_where_many_fixes_start_on_one_long_line_costs_linear_time():
    """20,000 fixes on a 1 MB command line of a README's fence: slicing the rest of the
    line for each (three times) was quadratic."""
    line = "torchrun x.py " + "--device cuda " * ((1 << 20) // 14)
    lines = [line, "echo done"]
    cols = range(14, len(line), len(line) // 20_000)
    start = time.perf_counter()
    found = [markdown._start(lines, 1, col) for col in cols]
    elapsed = time.perf_counter() - start
    assert found[0] == (1, 14) and found[-1] == _old_start(lines, 1, cols[-1])
    assert elapsed < 1.0, f"{elapsed:.2f} s"
