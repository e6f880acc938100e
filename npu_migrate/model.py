"""Plain result types shared by the engine, the rules, the cache and the report.

Nothing here imports libcst, so the CLI can build reports and read the cache
without paying for the parser.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True, order=True)
class Fix:
    """A change the tool made (or would make) at ``line``:``col`` of the original file."""

    line: int
    col: int
    rule: str
    message: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "line": self.line, "col": self.col, "message": self.message}


@dataclass(frozen=True, order=True)
class Finding:
    """Something that needs manual work; the tool does not rewrite it."""

    line: int
    col: int
    rule: str
    message: str
    suggestion: str

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "line": self.line,
            "col": self.col,
            "message": self.message,
            "suggestion": self.suggestion,
        }


@dataclass
class FileResult:
    """What happened to one file. ``new_source`` is None when nothing changed."""

    path: str
    fixes: list[Fix] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    new_source: bytes | None = None
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.new_source is not None

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "changed": self.changed,
            "error": self.error,
            "fixes": [f.to_json() for f in self.fixes],
            "findings": [f.to_json() for f in self.findings],
        }

    def to_cache(self) -> dict:
        return {
            "fixes": [asdict(f) for f in self.fixes],
            "findings": [asdict(f) for f in self.findings],
            "new_source": self.new_source.decode("latin-1") if self.new_source is not None else None,
        }

    @classmethod
    def from_cache(cls, path: str, data: dict) -> FileResult:
        new_source = data["new_source"]
        return cls(
            path=path,
            fixes=[Fix(**f) for f in data["fixes"]],
            findings=[Finding(**f) for f in data["findings"]],
            new_source=new_source.encode("latin-1") if new_source is not None else None,
        )
