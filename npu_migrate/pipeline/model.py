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

from dataclasses import asdict, dataclass, field, fields, replace


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
    #: the evidence for the change (``passed to `torch.device` as its device``); None:
    #: the rule's summary says it (:func:`npu_migrate.reporting.report.reason_for`)
    reason: str | None = None


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


#: How :attr:`FileResult.skipped` begins for a template: ``template (why)``.
TEMPLATE = "template ("


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
    #: Digest of the bytes the result was computed from (``npu_migrate.pipeline.files.content_digest``):
    #: nothing is shown or written for a file that no longer has them.
    source_digest: str | None = None
    #: Rule id -> (summary, impact class) for the rules of ``fixes`` and ``findings``,
    #: filled where the rules are loaded (the worker) and kept in the cache entry, so that
    #: a report of a cached run needs no rule module (nor libcst) in the parent:
    #: :func:`npu_migrate.reporting.report.reason_for`, :func:`npu_migrate.pipeline.registry.impact_of`.
    rule_notes: dict[str, tuple[str, str]] = field(default_factory=dict, compare=False, repr=False)
    #: Why no rule ran on the file: a data file (results, metrics, a dataset;
    #: :func:`npu_migrate.pipeline.file_roles.data_file_reason`) or a template
    #: (:data:`TEMPLATE` ``why)``: :mod:`npu_migrate.configs.templates`). Counted in the summary.
    skipped: str | None = None
    #: Warnings a library (nbformat, ...) raised while this file was migrated, caught by
    #: the runner and printed once per run as npu-migrate's own line
    #: (:func:`npu_migrate.pipeline.runner.migrate_safely`); kept in the cache entry.
    warnings: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def changed(self) -> bool:
        return self.new_source is not None

    @property
    def is_template(self) -> bool:
        """Skipped as a template (``npu_migrate/configs/templates.py``); every other
        skipped file is a data file (``npu_migrate/pipeline/file_roles.py``)."""
        return self.skipped is not None and self.skipped.startswith(TEMPLATE)

    def to_cache(self) -> dict:
        return {
            "fixes": [asdict(f) for f in self.fixes],
            "findings": [asdict(f) for f in self.findings],
            "new_source": self.new_source.decode("latin-1") if self.new_source is not None else None,
            "rules": {rule: list(note) for rule, note in self.rule_notes.items()},
            "skipped": self.skipped,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_cache(cls, path: str, data: object) -> FileResult:
        """The result a cache entry holds; TypeError or ValueError if ``data`` is not what :meth:`to_cache` makes."""
        if not isinstance(data, dict):
            raise TypeError(f"cache entry is a {type(data).__name__}, not an object")
        new_source = data.get("new_source")
        if new_source is not None and not isinstance(new_source, str):
            raise TypeError("cache entry: new_source is not a string")
        skipped = data.get("skipped")
        if skipped is not None and not isinstance(skipped, str):
            raise TypeError("cache entry: skipped is not a string")
        try:
            return cls(
                path=path,
                fixes=[Fix(**_checked(f, _FIX_FIELDS)) for f in _list(data.get("fixes"))],
                findings=[Finding(**_checked(f, _FINDING_FIELDS)) for f in _list(data.get("findings"))],
                new_source=new_source.encode("latin-1") if new_source is not None else None,
                rule_notes=_notes(data.get("rules", {})),
                skipped=skipped,
                warnings=_warnings(data.get("warnings", [])),
            )
        except UnicodeEncodeError as exc:  # not what to_cache writes
            raise ValueError(f"cache entry: {exc}") from None


def _schema(cls) -> dict[str, tuple[type, bool]]:
    """Field name -> (type, may be None), from the dataclass's own annotations."""
    kinds = {"int": int, "str": str}
    return {f.name: (kinds[str(f.type).split(" | ")[0]], str(f.type).endswith("| None")) for f in fields(cls)}


_FIX_FIELDS = _schema(Fix)
_FINDING_FIELDS = _schema(Finding)


def _notes(value: object) -> dict[str, tuple[str, str]]:
    if not isinstance(value, dict) or not all(
            isinstance(v, list) and len(v) == 2 and all(type(x) is str for x in v) for v in value.values()):
        raise TypeError("cache entry: rules is not an object of [summary, impact] pairs")
    return {str(rule): (note[0], note[1]) for rule, note in value.items()}


def _warnings(value: object) -> list[str]:
    if not isinstance(value, list) or not all(type(item) is str for item in value):
        raise TypeError("cache entry: warnings is not a list of strings")
    return list(value)


def _list(value: object) -> list:
    if not isinstance(value, list):
        raise TypeError("cache entry: fixes/findings is not a list")
    return value


def _checked(item: object, schema: dict[str, tuple[type, bool]]) -> dict:
    """``item`` if it is an object with exactly the fields of ``schema``, each of its type
    (bool is no int here)."""
    if not isinstance(item, dict) or item.keys() != schema.keys():
        raise TypeError("cache entry: a fix or finding has the wrong fields")
    for name, (kind, optional) in schema.items():
        if type(item[name]) is not kind and not (optional and item[name] is None):
            raise TypeError(f"cache entry: {name} is not {kind.__name__}")
    return item
