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

Files whose sources come in parts (a notebook's cells) give :func:`relocate` a
``split`` function that returns each part's text by cell number; positions that
name a cell are mapped through that cell's diff.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from difflib import SequenceMatcher
from functools import cached_property

from npu_migrate.model import FileResult
from npu_migrate.output import decode_text

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


#: File type name (``npu_migrate/filetypes.py``) -> how its files split into parts;
#: types not listed are one part (:func:`whole_file`).
SPLITS: dict[str, Split] = {"notebook": notebook_cells}


def split_for(path: str) -> Split:
    from npu_migrate import filetypes

    file_type = filetypes.by_name(path.replace("\\", "/").rsplit("/", 1)[-1])
    return SPLITS.get(file_type.name, whole_file) if file_type is not None else whole_file


class PositionMap:
    """Maps (line, column) of ``old`` to ``new``; lines 1-based, columns 0-based."""

    def __init__(self, old: str, new: str) -> None:
        self.old = _NEWLINE.split(old)
        self.new = _NEWLINE.split(new)
        self._pairs: dict[int, int] = {}

    @cached_property
    def _blocks(self) -> list[tuple[str, int, int, int, int]]:
        return SequenceMatcher(None, self.old, self.new, autojunk=False).get_opcodes()

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
        return j + 1, (col if old_line == new_line else _column(old_line, new_line, col, end))

    def _index(self, i: int) -> int:
        if i in self._pairs:
            return self._pairs[i]
        for tag, i1, i2, j1, j2 in self._blocks:
            if i1 <= i < i2:
                if tag == "equal":
                    j = j1 + (i - i1)
                elif tag == "delete" or j1 == j2:
                    j = min(j1, max(len(self.new) - 1, 0))
                else:
                    j = _best_match(self.old[i], self.new, j1, j2, (i - i1) / max(i2 - i1, 1))
                break
        else:  # after the last line
            j = len(self.new) + (i - len(self.old))
        self._pairs[i] = j
        return j


def _best_match(line: str, new: list[str], j1: int, j2: int, where: float) -> int:
    """The line of ``new[j1:j2]`` most like ``line`` (ties: the one at the same relative place)."""
    def score(j: int) -> tuple[float, float]:
        return SequenceMatcher(None, line, new[j], autojunk=False).ratio(), -abs((j - j1) / (j2 - j1) - where)

    return max(range(j1, j2), key=score)


def _column(old: str, new: str, col: int, end: bool) -> int:
    if col >= len(old):
        return len(new) + (col - len(old))
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if i1 <= col < i2:
            if tag == "equal":
                return j1 + (col - i1)
            return j2 if end and col > i1 else j1
    return col


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
