"""Code cells as one Python module, and back.

Cells are joined with a sentinel statement ``__npu_migrate_cell__(N)`` between
them (a statement, not a comment, so that a rule inserting code before a
cell's first statement inserts it after the sentinel, into the right cell), and
every IPython line becomes ``<indent>__npu_migrate_magic__(K)`` with the same
indentation, so the module parses and keeps its blocks. After migration the
module is cut at the sentinels and the placeholders get their lines back.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from npu_migrate.notebooks.magics import (
    PYTHON_CELL_MAGICS,
    Special,
    cell_magic,
    specials,
)

CELL = "__npu_migrate_cell__"
MAGIC = "__npu_migrate_magic__"
_CELL_LINE = re.compile(rf"^{CELL}\((\d+)\)\n", re.MULTILINE)
_MAGIC_LINE = re.compile(rf"^([ \t]*){MAGIC}\((\d+)\)[ \t]*$", re.MULTILINE)


@dataclass
class Joined:
    """The module and how to map it back."""

    source: str = ""
    #: Cell index (in the notebook) -> line (1-based) of the module where its code starts.
    starts: dict[int, int] = field(default_factory=dict)
    #: Placeholder number -> the IPython line(s) it stands for.
    held: list[Special] = field(default_factory=list)
    #: Cell index -> its first line when that is a Python-running cell magic (``%%time``).
    heads: dict[int, str] = field(default_factory=dict)
    #: (start, cell index) in module order, for :meth:`locate`.
    _order: list[tuple[int, int]] = field(default_factory=list, repr=False, compare=False)

    def locate(self, line: int) -> tuple[int, int] | None:
        """(cell index, line in the cell, 1-based) of a module line; None on a sentinel
        (a binary search: the notebook engine locates every fix and finding, so a
        scan of all cells per call made large notebooks quadratic)."""
        if len(self._order) != len(self.starts):
            self._order = sorted((start, cell) for cell, start in self.starts.items())
        at = bisect.bisect_right(self._order, (line, float("inf"))) - 1
        if at < 0:
            return None
        start, cell = self._order[at]
        return cell, line - start + 1


def join(cells: dict[int, str]) -> Joined:
    """``cells``: notebook cell index -> source of each code cell to migrate (Python)."""
    joined = Joined()
    parts = []
    line = 1
    for index, source in cells.items():
        lines = source.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        magic = cell_magic(lines)
        if magic is not None:
            if magic not in PYTHON_CELL_MAGICS:
                continue
            joined.heads[index] = lines[0]
            lines = lines[1:]
        parts.append(f"{CELL}({index})\n")
        line += 1
        joined.starts[index] = line
        held = specials(lines)
        for offset, special in reversed(list(enumerate(held))):
            indent = special.text[: len(special.text) - len(special.text.lstrip(" \t"))]
            number = len(joined.held) + offset
            lines[special.first : special.last + 1] = [f"{indent}{MAGIC}({number})\n"]
        joined.held.extend(held)
        parts.extend(lines)
        line += len(lines)
    joined.source = "".join(parts)
    return joined


def split(joined: Joined, module: str, original: dict[int, str]) -> dict[int, str]:
    """The migrated module cut back into cells (cell index -> new source), IPython
    lines restored and each cell's trailing-newline convention kept."""
    out: dict[int, str] = {}
    marks = list(_CELL_LINE.finditer(module))
    head = module[: marks[0].start()] if marks else ""
    for number, mark in enumerate(marks):
        index = int(mark.group(1))
        end = marks[number + 1].start() if number + 1 < len(marks) else len(module)
        body = module[mark.end() : end]
        if number == 0:
            body = head + body  # anything a rule put above the first cell belongs to it
        body = _MAGIC_LINE.sub(lambda m: _restore(joined.held[int(m.group(2))].text), body)
        body = joined.heads.get(index, "") + body
        if not original[index].endswith("\n") and body.endswith("\n"):
            body = body[:-1]
        out[index] = body
    return out


def _restore(text: str) -> str:
    return text.removesuffix("\n")
