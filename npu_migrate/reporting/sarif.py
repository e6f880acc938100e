"""``--output-format sarif``: SARIF 2.1.0 (GitHub code scanning, VS Code's SARIF
viewer, Azure DevOps). Findings and pending fixes are results with the rule's
documentation in ``tool.driver.rules``; files that could not be processed are
``toolExecutionNotifications`` of the invocation. Columns count code points
(``columnKind: unicodeCodePoints``), 1-based, end exclusive, as SARIF defines.
A test validates the output against the OASIS schema.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from urllib.parse import quote

from npu_migrate import __version__
from npu_migrate.reporting.report import Annotation, Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


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
    from npu_migrate.registry import all_rules
    from npu_migrate.rulebase import rule_doc

    rules = all_rules()
    return [
        {
            "id": rid,
            "name": rules[rid].name,
            "shortDescription": {"text": rules[rid].summary},
            "fullDescription": {"text": rules[rid].summary},
            "help": {"text": rules[rid].rationale.strip() or rules[rid].summary, "markdown": rule_doc(rules[rid])},
            "properties": {"fixable": rules[rid].fixable},
        }
        for rid in used
    ]


def as_dict(report: Report) -> dict:
    annotations = report.annotations()
    used = sorted({a.rule for a in annotations if a.rule})
    index = {rid: i for i, rid in enumerate(used)}
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
                  "properties": {"kind": a.kind}}
        if a.suggestion:
            result["properties"]["suggestion"] = a.suggestion
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
    return json.dumps(as_dict(report), indent=2, ensure_ascii=False) + "\n"
