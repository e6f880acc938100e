"""Everything that decides a file's result besides its bytes (part of the cache key)."""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_migrate.facts import ProjectFacts
from npu_migrate.selection import Selection


@dataclass(frozen=True)
class Settings:
    selection: Selection = field(default_factory=Selection)
    facts: ProjectFacts = field(default_factory=ProjectFacts)
    annotate: bool = False
    prefilter: bool = True

    def key(self) -> str:
        return f"{self.selection.key()}|{self.facts.key()}|annotate={self.annotate}|prefilter={self.prefilter}"
