"""``--output-format gitlab``: a GitLab code-quality report (a JSON array of Code
Climate issues), for ``artifacts: reports: codequality:`` in ``.gitlab-ci.yml``."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from npu_migrate.reporting.printable import json_safe
from npu_migrate.reporting.report import Annotation, Report

_SEVERITY = {"error": "major", "warning": "minor", "note": "info"}


def _issue(a: Annotation, fingerprint: str) -> dict:
    location: dict = {"path": a.path}
    if a.line is not None:
        location["positions"] = {"begin": {"line": a.line, "column": a.col},
                                 "end": {"line": a.end_line, "column": a.end_col}}
    else:
        location["lines"] = {"begin": 1}
    description = f"{a.rule}: {a.message}" if a.rule else a.message
    if a.suggestion:
        description += f" (suggestion: {a.suggestion})"
    return {
        "type": "issue",
        "check_name": a.rule or "npu-migrate-error",
        "description": description,
        "categories": ["Compatibility"],
        "severity": "blocker" if a.kind == "error" else _SEVERITY[a.level],
        "fingerprint": fingerprint,
        "location": location,
    }


def render(report: Report) -> str:
    # Fingerprints leave the line out, so that an issue keeps its identity when code
    # above it moves; the n-th identical issue in a file gets its own.
    seen: Counter[tuple] = Counter()
    issues = []
    for a in report.annotations():
        key = (a.path, a.cell, a.rule, a.kind, a.message)
        seen[key] += 1
        digest = hashlib.sha256(repr((*key, seen[key])).encode("utf-8", "surrogateescape")).hexdigest()
        issues.append(_issue(a, digest))
    return json_safe(json.dumps(issues, indent=2, ensure_ascii=False)) + "\n"
