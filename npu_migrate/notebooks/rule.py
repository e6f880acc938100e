"""The base class of the notebook rules (``rules/notebooks/``): rules for IPython's
own lines (``%env``, ``%%bash``...), which neither the Python nor the shell rules
read. A rule sees each IPython line of each code cell, ``visit_line(line)``, and
records ``self.replace(line, new_text, message)`` or
``self.report(line, column, message, suggestion)``. Examples are notebooks
written as the code of one cell (``example.ipynb``: the tests wrap them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from npu_migrate.notebooks.lines import CellLine, NotebookFile
from npu_migrate.pipeline.rulebase import Example, RuleBase

__all__ = ["CellLine", "Example", "NotebookRule"]


class NotebookRule(RuleBase):
    front_end: ClassVar[str] = "notebook"
    triggers: ClassVar[Sequence[str]] = ()

    def __init__(self, file: NotebookFile) -> None:
        self.file = file

    def visit_line(self, line: CellLine) -> None:
        """Called for every IPython line (magics, ``!`` escapes) of every code cell."""

    def replace(self, line: CellLine, text: str, message: str) -> None:
        self.file.replace_line(line, text, self.id, message)

    def report(self, line: CellLine, column: int, message: str, suggestion: str) -> None:
        self.file.report(line, column, self.id, message, suggestion)
