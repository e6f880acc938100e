"""Everything that decides a file's result besides its bytes (part of the cache key)."""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.selection import Selection


@dataclass(frozen=True)
class Settings:
    selection: Selection = field(default_factory=Selection)
    facts: ProjectFacts = field(default_factory=ProjectFacts)
    annotate: bool = False
    prefilter: bool = True
    #: What CUDA becomes: "npu" (the product) or "cpu" (verify's reference twin).
    target: str = "npu"

    def key(self) -> str:
        return (f"{self.selection.key()}|{self.facts.key()}|annotate={self.annotate}|prefilter={self.prefilter}"
                + ("" if self.target == "npu" else f"|target={self.target}"))
