"""What the notebook rules read and write: one IPython line of a code cell
(:class:`CellLine`), and the notebook's record of the rules' edits and findings
(:class:`NotebookFile`). The rules (``notebooks/rule.py``) and the front end
(``notebooks/engine.py``) both build on it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from npu_migrate.pipeline.model import Finding, Fix
from npu_migrate.pipeline.suppression import MARK
from npu_migrate.pipeline.suppression import parse as parse_suppression


@dataclass(frozen=True)
class CellLine:
    """One IPython line: its cell (notebook index), its line in the cell (1-based)
    and its text without the line break."""

    cell: int
    line: int
    text: str


def located(item: Fix | Finding, cell: int, line: int):
    """``item`` moved to ``line`` of the cell with index ``cell`` (the result names the
    cell by its number, 1-based: ``npu_migrate/pipeline/model.py``)."""
    end_line = item.end_line + line - item.line if item.end_line is not None else None
    return dataclasses.replace(item, line=line, end_line=end_line, cell=cell + 1)


class NotebookFile:
    """The new text of each cell's IPython lines, and the notebook rules' findings."""

    def __init__(self) -> None:
        self.lines: dict[tuple[int, int], tuple[str | None, str, str]] = {}  # None: a line joined into the one before
        self.fixes: list[Fix] = []
        self.findings: list[Finding] = []

    @staticmethod
    def suppressed(line: CellLine, rule: str) -> bool:
        """``# npu-migrate: ignore[...]`` on the line itself."""
        codes = parse_suppression(line.text) if MARK in line.text else None
        return codes is not None and any(rule.startswith(code) for code in codes)

    def replace_line(self, line: CellLine, text: str, rule: str, message: str) -> None:
        if self.suppressed(line, rule):
            return
        self.lines[(line.cell, line.line)] = (text, rule, message)
        self.fixes.append(located(Fix(line.line, 0, rule, message), line.cell, line.line))

    def report(self, line: CellLine, column: int, rule: str, message: str, suggestion: str) -> None:
        if self.suppressed(line, rule):
            return
        self.findings.append(located(Finding(line.line, column, rule, message, suggestion), line.cell, line.line))
