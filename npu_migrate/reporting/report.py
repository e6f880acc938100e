"""What every output format is made from: the results of a run, and what the run was.

:class:`Report` holds the per-file results (positions already those of the file
on disk after the run, see :mod:`npu_migrate.reporting.relocate`), the mode and the
options that change what is shown. :meth:`Report.annotations` flattens it into
the list the CI formats (SARIF, GitHub, GitLab) print: one entry per file error,
per finding and per pending fix, with 1-based columns and a severity.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from npu_migrate.pipeline.model import FileResult, Finding, Fix

#: What the run did to the files: a dry run, ``--check``, ``--write``, or stdin mode.
MODES = ("dry-run", "check", "write", "stdin")


@dataclass(frozen=True)
class Annotation:
    """One thing to show a CI user at a place in a file. Lines and columns are 1-based;
    ``end_col`` is exclusive; ``line`` is None for an error without a place."""

    path: str
    kind: str  # "error", "finding" or "fix"
    level: str  # "error", "warning" or "note"
    rule: str | None
    message: str
    suggestion: str | None = None
    line: int | None = None
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None
    cell: int | None = None
    #: why a fix was made (its evidence, or the rule's summary); None for findings and errors
    reason: str | None = None


def reason_for(fix: Fix, notes: dict[str, tuple[str, str]] | None = None) -> str:
    """Why the tool made ``fix``: the evidence its rule recorded (``passed to
    `torch.device` as its device``), else the rule's one-line summary (from ``notes``,
    the result's :attr:`~npu_migrate.pipeline.model.FileResult.rule_notes`, where they
    have it: no rule module is imported then)."""
    if fix.reason:
        return fix.reason
    if notes and fix.rule in notes:
        return notes[fix.rule][0]
    from npu_migrate.pipeline.registry import all_rules

    rule = all_rules().get(fix.rule)
    return rule.summary if rule is not None else ""


@dataclass
class Report:
    results: list[FileResult]
    mode: str = "dry-run"
    fail_on_findings: bool = False
    show_fixes: bool = False
    statistics: bool = False
    verbose: bool = False
    elapsed: float | None = None
    #: the run vendors npu_runtime (``--vendor-runtime``, or a copy an earlier run left):
    #: nothing is declared, and the summary does not say how to install it
    runtime_vendored: bool = False
    summary: dict = field(init=False)

    def __post_init__(self) -> None:
        self.summary = summarise(self.results)

    @property
    def pending(self) -> bool:
        """Whether files would change (and were not written)."""
        return any(r.changed and not r.written for r in self.results)

    def annotations(self) -> list[Annotation]:
        return list(self._annotations())

    def _annotations(self) -> Iterator[Annotation]:
        for result in self.results:
            if result.error is not None:
                yield error_annotation(result.path, result.error)
            if result.changed and not result.written:
                level = "error" if self.mode == "check" else "warning"
                for fix in result.fixes:
                    yield _at(result.path, fix, "fix", level, fix.message + " (fixable: run with --write)",
                              reason=reason_for(fix, result.rule_notes))
            for finding in result.findings:
                level = "error" if self.fail_on_findings else _LEVEL[_impact(finding.rule, result.rule_notes)]
                yield _at(result.path, finding, "finding", level, finding.message, finding.suggestion)


def _at(path: str, item: Fix | Finding, kind: str, level: str, message: str, suggestion: str | None = None,
        reason: str | None = None) -> Annotation:
    end_line, end_col = item.end
    return Annotation(path, kind, level, item.rule, message, suggestion or None,
                      item.line, item.col + 1, end_line, end_col + 1, item.cell, reason)


#: A finding's severity in the CI formats follows its rule's impact class.
_LEVEL = {"blocking": "error", "review": "warning", "informational": "note"}


def _impact(rule_id: str, notes: dict[str, tuple[str, str]] | None = None) -> str:
    # Imported here: the rules (and libcst) load only for the formats that need them
    # and only where the results' notes do not say it (never for a warm, fully cached run).
    from npu_migrate.pipeline.registry import impact_of

    return impact_of(rule_id, notes)


def findings_by_impact(results: list[FileResult]) -> dict[str, int]:
    """Findings counted per impact class (``blocking``, ``review``, ``informational``)."""
    from npu_migrate.pipeline.rulebase import IMPACTS

    counts = Counter(_impact(f.rule, r.rule_notes) for r in results for f in r.findings)
    return {impact: counts.get(impact, 0) for impact in IMPACTS}

_ERROR_PLACE = re.compile(r"(?P<line>\d+)(?::(?P<col>\d+))?: (?P<message>.*)", re.DOTALL)


def error_annotation(path: str, error: str) -> Annotation:
    """Errors read ``path:line:col: message`` (line and column optional), as printed."""
    rest = error[len(path) + 1:].lstrip() if error.startswith(path + ":") else error
    match = _ERROR_PLACE.fullmatch(rest)
    if match is None:
        return Annotation(path, "error", "error", None, rest)
    col = int(match["col"]) if match["col"] else 1
    line = int(match["line"])
    return Annotation(path, "error", "error", None, match["message"], None, line, col, line, col)


def summarise(results: list[FileResult]) -> dict:
    fixes = Counter(f.rule for r in results for f in r.fixes)
    findings = Counter(f.rule for r in results for f in r.findings)
    return {
        "files_scanned": len(results),
        "files_changed": sum(r.changed for r in results),
        "files_written": sum(r.written for r in results),
        "files_failed": sum(r.error is not None for r in results),
        "files_skipped_data": sum(r.skipped is not None and not r.is_template for r in results),
        "files_skipped_template": sum(r.is_template for r in results),
        "fixes": sum(fixes.values()),
        "findings": sum(findings.values()),
        "fixes_by_rule": dict(sorted(fixes.items())),
        "findings_by_rule": dict(sorted(findings.items())),
    }
