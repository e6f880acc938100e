"""Plain result types shared by the engine, the rules, the cache and the reporters.

Nothing here imports libcst, so the CLI can build reports and read the cache
without paying for the parser.

Positions: ``line`` is 1-based; ``col`` is 0-based and counts characters (code
points), as libcst and CPython's ``ast`` give them; ``end_line``/``end_col`` point
just past the end of the node (exclusive). The reporters print columns 1-based
(``npu_migrate/reporting/``). ``cell`` is for front ends whose files hold several
sources: a notebook's finding gives the cell's number (1-based, as users count
cells and ruff prints them: the first cell of ``cells`` is cell 1) and
``line``/``col`` inside that cell; it is None for plain files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


class _Located:
    """Position helpers shared by :class:`Fix` and :class:`Finding`."""

    def moved(self, line: int, col: int, end_line: int, end_col: int):
        return replace(self, line=line, col=col, end_line=end_line, end_col=end_col)

    @property
    def end(self) -> tuple[int, int]:
        return (self.end_line, self.end_col) if self.end_line is not None else (self.line, self.col)


@dataclass(frozen=True, order=True)
class Fix(_Located):
    """A change the tool made (or would make) at ``line``:``col`` of the original file."""

    line: int
    col: int
    rule: str
    message: str
    end_line: int | None = None  # None: the same as line:col
    end_col: int | None = None
    cell: int | None = None


@dataclass(frozen=True, order=True)
class Finding(_Located):
    """Something that needs manual work; the tool does not rewrite it."""

    line: int
    col: int
    rule: str
    message: str
    suggestion: str
    end_line: int | None = None
    end_col: int | None = None
    cell: int | None = None


@dataclass
class FileResult:
    """What happened to one file. ``new_source`` is None when nothing changed.

    Positions are those of the file as it was read, until a reporter moves them
    to the file as written (:mod:`npu_migrate.reporting.relocate`)."""

    path: str
    fixes: list[Fix] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    new_source: bytes | None = None
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.new_source is not None

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
