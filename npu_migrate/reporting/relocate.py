"""Positions of the file as it is on disk after the run.

The engine reports positions in the file it read. After ``--write`` (and for the
source printed in stdin mode) users open the migrated file, where inserted
imports, sampler lines or ``--annotate`` comments have moved everything below
them. :func:`relocate` maps every position through a line diff of the two
versions (difflib), and inside a changed line through a diff of its characters,
so a finding on an untouched line lands exactly on that line and column, and one
on a rewritten line lands on the line that replaced it. A message or suggestion
that cites another line of the file ("created only later (line 48)") cites it in
the written file too, so ``--check`` over that file reports the same text.

The cost stays linear in the size of the file (issue 29: 20,000 identical lines,
or a 37 KB one-line JSON, took 40-50 s): the common head and tail are cut off
first; what is left is diffed with difflib only while it is small
(:data:`SMALL`), and otherwise with a linear re-synchronising scan
(:func:`_sync_opcodes`); blocks are found by bisection; a replaced line is
matched against a few lines around its place, not against the whole block; and
a line's character diff is made once, however many positions it holds.

Files whose sources come in parts (a notebook's cells) give :func:`relocate` a
``split`` function that returns each part's text by cell number; positions that
name a cell are mapped through that cell's diff.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from difflib import SequenceMatcher
from functools import cached_property

from npu_migrate.pipeline.files import decode_text
from npu_migrate.pipeline.model import FileResult

#: Line breaks as Python's tokenizer (and so libcst and ``ast``) counts them: not
#: ``str.splitlines``, which also breaks at form feeds and U+2028.
_NEWLINE = re.compile(r"\r\n|\r|\n")

Split = Callable[[bytes], "dict[int | None, str]"]

#: How rules cite a line of the same file in a message or suggestion: ``line 48``.
#: Text between backticks is the user's code, never a citation.
_CITED_LINE = re.compile(r"\bline (\d+)\b")


def whole_file(data: bytes) -> dict[int | None, str]:
    """One part: the decoded file (positions without a cell)."""
    return {None: decode_text(data)}


def notebook_cells(data: bytes) -> dict[int | None, str]:
    """A notebook's cells by number (1-based, as findings name them), each cell's source text."""
    from npu_migrate.notebooks.layout import cell_texts

    return cell_texts(data)


#: File type name (``npu_migrate/pipeline/filetypes.py``) -> how its files split into parts;
#: types not listed are one part (:func:`whole_file`).
SPLITS: dict[str, Split] = {"notebook": notebook_cells}


def split_for(path: str) -> Split:
    from npu_migrate.pipeline import filetypes

    file_type = filetypes.by_name(path.replace("\\", "/").rsplit("/", 1)[-1])
    return SPLITS.get(file_type.name, whole_file) if file_type is not None else whole_file


class PositionMap:
    """Maps (line, column) of ``old`` to ``new``; lines 1-based, columns 0-based."""

    def __init__(self, old: str, new: str) -> None:
        self.old = _NEWLINE.split(old)
        self.new = _NEWLINE.split(new)
        self._pairs: dict[int, int] = {}
        self._columns: dict[tuple[str, str], tuple[list, list[int]]] = {}

    @cached_property
    def _blocks(self) -> list[tuple[str, int, int, int, int]]:
        return opcodes(self.old, self.new)

    @cached_property
    def _starts(self) -> list[int]:
        return [block[1] for block in self._blocks]

    def line(self, line: int) -> int:
        """The 1-based line of ``new`` that holds what line ``line`` of ``old`` held."""
        return self._index(line - 1) + 1

    def position(self, line: int, col: int, end: bool = False) -> tuple[int, int]:
        """Where ``line``:``col`` went. ``end``: the position is the (exclusive) end of
        a range, so a position inside replaced text moves to the replacement's end."""
        i = line - 1
        if i >= len(self.old):  # just past the last line
            return len(self.new) + (i - len(self.old)) + 1, col
        j = self._index(i)
        if j >= len(self.new):
            return len(self.new), len(self.new[-1]) if self.new else 0
        old_line, new_line = self.old[i], self.new[j]
        if old_line == new_line:
            return j + 1, col
        blocks = self._columns.get((old_line, new_line))  # by text: alike lines share one diff
        if blocks is None:
            made = opcodes(old_line, new_line)
            blocks = self._columns[old_line, new_line] = (made, [block[1] for block in made])
        return j + 1, _column(blocks, old_line, new_line, col, end)

    def _index(self, i: int) -> int:
        if i in self._pairs:
            return self._pairs[i]
        at = bisect.bisect_right(self._starts, i) - 1
        if 0 <= at and i < self._blocks[at][2]:
            tag, i1, i2, j1, j2 = self._blocks[at]
            if tag == "equal":
                j = j1 + (i - i1)
            elif tag == "delete" or j1 == j2:
                j = min(j1, max(len(self.new) - 1, 0))
            elif i2 - i1 == j2 - j1:  # lines rewritten one for one
                j = j1 + (i - i1)
            else:
                self._pairs.update(_align(self.old, self.new, i1, i2, j1, j2))
                return self._pairs[i]
        else:  # after the last line
            j = len(self.new) + (i - len(self.old))
        self._pairs[i] = j
        return j


#: How many following lines of ``new`` a replaced line is compared with.
NEAR = 8
#: Above this many elements left after the common head and tail, the diff is the
#: linear scan, not difflib (whose cost grows with the square of repeated elements).
SMALL = 2000


def _align(old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int) -> dict[int, int]:
    """Where each line of a replaced block ``old[i1:i2]`` went in ``new[j1:j2]`` (blocks of
    different sizes): in order, each to the most similar of the next few lines, so the
    cost is linear and lines that are all alike keep their order."""
    pairs = {}
    previous = j1 - 1
    for i in range(i1, i2):
        room = (j2 - previous - 1) >= (i2 - i)  # enough lines left to move on
        low = min(previous + 1, j2 - 1) if room else max(previous, j1)
        candidates = range(low, min(j2, low + NEAR + 1))

        def score(j: int, line: str = old[i], low: int = low) -> tuple[float, int]:
            return SequenceMatcher(None, line, new[j], autojunk=False).quick_ratio(), -(j - low)

        previous = pairs[i] = max(candidates, key=score)
    return pairs


def _column(blocks, old: str, new: str, col: int, end: bool) -> int:
    if col >= len(old):
        return len(new) + (col - len(old))
    blocks, starts = blocks
    at = bisect.bisect_right(starts, col) - 1
    if 0 <= at:
        tag, i1, i2, j1, j2 = blocks[at]
        if i1 <= col < i2:
            if tag == "equal":
                return j1 + (col - i1)
            return j2 if end and col > i1 else j1
    return col


def opcodes(a: Sequence, b: Sequence) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes turning ``a`` into ``b``, in time linear in their size."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    middle_a, middle_b = a[head:len(a) - tail], b[head:len(b) - tail]
    if len(middle_a) <= SMALL and len(middle_b) <= SMALL:
        inner = SequenceMatcher(None, middle_a, middle_b, autojunk=False).get_opcodes()
    else:
        inner = _sync_opcodes(middle_a, middle_b)
    out = [("equal", 0, head, 0, head)] if head else []
    out += [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in inner
            if (i1, i2, j1, j2) != (0, 0, 0, 0) or tag != "equal"]
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


def _sync_opcodes(a: Sequence, b: Sequence, window: int = 64, run: int = 4) -> list[tuple[str, int, int, int, int]]:
    """Opcodes from one forward scan: equal elements are matched in order; at a
    difference, the nearest point within ``window`` elements on both sides where
    ``run`` elements agree again is taken, and what lies before it is a change."""
    out: list[tuple[str, int, int, int, int]] = []
    i = j = 0

    def emit(tag, i1, i2, j1, j2):
        if i1 == i2 and j1 == j2:
            return
        if out and (out[-1][0] == "equal") == (tag == "equal"):  # one change block, not several
            _, i0, _, j0, _ = out[-1]
            merged = tag if tag == "equal" else "replace" if i2 > i0 and j2 > j0 else "delete" if i2 > i0 else "insert"
            out[-1] = (merged, i0, i2, j0, j2)
        else:
            out.append((tag, i1, i2, j1, j2))

    while i < len(a) and j < len(b):
        start_i, start_j = i, j
        while i < len(a) and j < len(b) and a[i] == b[j]:
            i += 1
            j += 1
        emit("equal", start_i, i, start_j, j)
        if i >= len(a) or j >= len(b):
            break
        found = None
        best = 2 * window + 1
        places: dict = {}
        for jj in range(j, min(len(b), j + window)):
            places.setdefault(b[jj], []).append(jj)
        # the nearest a[i + da] == b[jj] (smallest da + jj - j) from which ``run`` elements agree
        for da in range(min(window, len(a) - i)):
            if da >= best:
                break
            for jj in places.get(a[i + da], ()):
                cost = da + jj - j
                if cost >= best:
                    break
                if cost and a[i + da:i + da + run] == b[jj:jj + run]:
                    found, best = (i + da, jj), cost
                    break
        if found is None:  # nothing agrees again within the window: all of it changed
            step = max(1, window // 2)
            found = (min(len(a), i + step), min(len(b), j + step))
        fi, fj = found
        tag = "replace" if fi > i and fj > j else "delete" if fi > i else "insert"
        emit(tag, i, fi, j, fj)
        i, j = fi, fj
    if i < len(a) or j < len(b):
        emit("replace" if i < len(a) and j < len(b) else "delete" if i < len(a) else "insert", i, len(a), j, len(b))
    return out


def _recite(text: str, mapping: PositionMap) -> str:
    """``text`` with every cited line number moved through ``mapping``."""
    parts = text.split("`")
    parts[::2] = [
        _CITED_LINE.sub(lambda m: f"line {mapping.line(int(m.group(1)))}", part) for part in parts[::2]
    ]
    return "`".join(parts)


def relocate(result: FileResult, old: bytes, new: bytes, split: Split = whole_file) -> FileResult:
    """``result`` with every position moved from ``old`` to ``new``."""
    if old == new or not (result.fixes or result.findings):
        return result
    before, after = split(old), split(new)
    maps: dict[int | None, PositionMap] = {}

    def move(item):
        if item.cell not in before or item.cell not in after:
            return item
        mapping = maps.get(item.cell)
        if mapping is None:
            mapping = maps[item.cell] = PositionMap(before[item.cell], after[item.cell])
        line, col = mapping.position(item.line, item.col)
        end_line, end_col = mapping.position(*item.end, end=True)
        end_line, end_col = max((end_line, end_col), (line, col))
        texts = {name: _recite(getattr(item, name), mapping) for name in ("message", "suggestion") if hasattr(item, name)}
        return replace(item.moved(line, col, end_line, end_col), **texts)

    return replace(result, fixes=[move(f) for f in result.fixes], findings=[move(f) for f in result.findings])
