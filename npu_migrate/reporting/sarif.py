"""``--output-format sarif``: SARIF 2.1.0 (GitHub code scanning, VS Code's SARIF
viewer, Azure DevOps). Findings and pending fixes are results with the rule's
documentation in ``tool.driver.rules``; files that could not be processed are
``toolExecutionNotifications`` of the invocation. Columns count code points
(``columnKind: unicodeCodePoints``), 1-based, end exclusive, as SARIF defines.
A test validates the output against the OASIS schema.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections import Counter
from pathlib import Path, PurePath
from urllib.parse import quote

from npu_migrate import __version__
from npu_migrate.pipeline.registry import impact_of
from npu_migrate.reporting.printable import json_safe
from npu_migrate.reporting.report import Annotation, Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: The key of our ``partialFingerprints``: a hash of the rule, the file, the text of the
#: line (whitespace-trimmed) and the how-many-th such result it is, so an alert keeps its
#: identity when lines above it move (what GitHub deduplicates alerts by).
FINGERPRINT = "npuMigrateLineHash/v1"


class _Files:
    """The texts a report's positions refer to (the files on disk after the run) and, for
    files with pending changes, the migrated text, to turn a fix into replacements."""

    def __init__(self, report: Report) -> None:
        self._pending = {r.path: r.new_source for r in report.results if r.changed and not r.written}
        self._lines: dict[str, list[str] | None] = {}
        self._opcodes: dict[str, list | None] = {}

    def lines(self, path: str) -> list[str] | None:
        if path not in self._lines:
            try:
                self._lines[path] = Path(path).read_bytes().decode("utf-8-sig").splitlines(keepends=True)
            except (OSError, UnicodeDecodeError):
                self._lines[path] = None
        return self._lines[path]

    def replacements(self, a: Annotation) -> list[dict]:
        """The hunks of the pending change (as the diff prints them) that hold the fix's
        lines, as SARIF replacements: character offsets into the file as it is on disk.
        A hunk holds every change within three lines of another, so two fixes close
        together share one replacement."""
        new = self._pending.get(a.path)
        old_lines = self.lines(a.path)
        if new is None or old_lines is None or a.cell is not None or a.line is None:
            return []
        try:
            new_lines = new.decode("utf-8-sig").splitlines(keepends=True)
        except UnicodeDecodeError:
            return []
        if a.path not in self._opcodes:  # the diff's hunks (3 lines of context, as printed)
            matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
            self._opcodes[a.path] = [("hunk", g[0][1], g[-1][2], g[0][3], g[-1][4])
                                     for g in matcher.get_grouped_opcodes(3)]
        starts = [0]
        for line in old_lines:
            starts.append(starts[-1] + len(line))
        first, last = a.line - 1, (a.end_line or a.line) - 1
        out = []
        for _tag, i1, i2, j1, j2 in self._opcodes[a.path] or ():
            touches = (i1 <= last and i2 > first) if i2 > i1 else first <= i1 <= last + 1
            if touches:
                out.append({"deletedRegion": {"charOffset": starts[i1], "charLength": starts[i2] - starts[i1]},
                            "insertedContent": {"text": "".join(new_lines[j1:j2])}})
        return out


def _fingerprint(a: Annotation, files: _Files, seen: Counter) -> str:
    lines = files.lines(a.path) if a.cell is None else None
    text = lines[a.line - 1].strip() if lines and a.line and a.line <= len(lines) else ""
    key = (a.rule or "", a.path, text)
    seen[key] += 1
    digest = hashlib.sha256("\0".join((*key, str(a.cell or 0), str(seen[key]))).encode()).hexdigest()
    return f"{digest[:32]}:{seen[key]}"


def _uri(path: str) -> str:
    pure = PurePath(path)
    return pure.as_uri() if pure.is_absolute() else quote(pure.as_posix())


def _location(a: Annotation) -> dict:
    physical: dict = {"artifactLocation": {"uri": _uri(a.path)}}
    if a.line is not None:
        physical["region"] = {"startLine": a.line, "startColumn": a.col, "endLine": a.end_line, "endColumn": a.end_col}
    location: dict = {"physicalLocation": physical}
    if a.cell is not None:
        location["properties"] = {"cell": a.cell}
    return location


def _rules(used: list[str]) -> list[dict]:
    from npu_migrate.pipeline.registry import all_rules
    from npu_migrate.pipeline.rulebase import rule_doc

    rules = all_rules()
    return [
        {
            "id": rid,
            "name": rules[rid].name,
            "shortDescription": {"text": rules[rid].summary},
            "fullDescription": {"text": rules[rid].summary},
            "help": {"text": rules[rid].rationale.strip() or rules[rid].summary, "markdown": rule_doc(rules[rid])},
            "properties": {"fixable": rules[rid].fixable, "impact": rules[rid].impact},
        }
        for rid in used
    ]


def as_dict(report: Report) -> dict:
    annotations = report.annotations()
    used = sorted({a.rule for a in annotations if a.rule})
    index = {rid: i for i, rid in enumerate(used)}
    files = _Files(report)
    seen: Counter[tuple[str, str, str]] = Counter()
    results, notifications = [], []
    for a in annotations:
        if a.kind == "error":
            notifications.append({"level": "error", "message": {"text": a.message}, "locations": [_location(a)]})
            continue
        text = a.message if not a.suggestion else f"{a.message}\nSuggestion: {a.suggestion}"
        if a.reason:
            text = f"{text}\nWhy: {a.reason}"
        result = {"ruleId": a.rule, "ruleIndex": index[a.rule], "level": a.level, "kind": "fail",
                  "message": {"text": text}, "locations": [_location(a)],
                  "partialFingerprints": {FINGERPRINT: _fingerprint(a, files, seen)},
                  "properties": {"kind": a.kind}}
        if a.suggestion:
            result["properties"]["suggestion"] = a.suggestion
        if a.kind == "finding":
            result["properties"]["impact"] = impact_of(a.rule)
        if a.kind == "fix":
            replacements = files.replacements(a)
            if replacements:
                result["fixes"] = [{"description": {"text": a.message},
                                    "artifactChanges": [{"artifactLocation": {"uri": _uri(a.path)},
                                                         "replacements": replacements}]}]
        if a.reason:
            result["properties"]["reason"] = a.reason
        results.append(result)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "npu-migrate", "version": __version__, "semanticVersion": __version__,
                                "rules": _rules(used)}},
            "columnKind": "unicodeCodePoints",
            "invocations": [{"executionSuccessful": not notifications,
                             "toolExecutionNotifications": notifications}],
            "results": results,
        }],
    }


def render(report: Report) -> str:
    return json_safe(json.dumps(as_dict(report), indent=2, ensure_ascii=False)) + "\n"
