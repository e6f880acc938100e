"""The base class of the dependency-file rules (``rules/deps/``).

A deps rule reads the whole file at once through the neutral view of
:mod:`npu_migrate.deps.model` (its lists of requirements, its package indexes),
whatever the format, in ``check(document)``. It never changes the file; it
records ``self.edit(start, end, new, message)`` and
``self.report(offset, statement, message, suggestion)``. Documented examples
are ``requirements.txt`` files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from npu_migrate.pipeline.rulebase import Example, RuleBase

if TYPE_CHECKING:
    from npu_migrate.deps.engine import DepsFile
    from npu_migrate.deps.model import DepsDocument, Entry

__all__ = ["DepsRule", "Example"]


class DepsRule(RuleBase):
    front_end: ClassVar[str] = "deps"
    #: Byte strings of which a file must contain one for the rule to run.
    triggers: ClassVar[Sequence[bytes]] = ()

    def __init__(self, file: DepsFile) -> None:
        self.file = file

    @classmethod
    def triggered(cls, data: bytes) -> bool:
        return any(t in data for t in cls.triggers)

    @classmethod
    def wanted(cls, settings) -> bool:
        """Whether the run's settings (a project fact) make the rule run on every file."""
        return False

    def check(self, document: DepsDocument) -> None:
        """Record the rule's edits and findings for the whole file."""

    def edit(self, start: int, end: int, new: bytes, message: str, anchor: int | None = None) -> None:
        self.file.recorder.replace(start, end, new, self.id, message, anchor)

    def report(self, offset: int, statement: int, message: str, suggestion: str) -> None:
        self.file.recorder.report(offset, self.id, message, suggestion, statement)

    def report_entry(self, entry: Entry, message: str, suggestion: str) -> None:
        self.report(entry.start, entry.statement, message, suggestion)
