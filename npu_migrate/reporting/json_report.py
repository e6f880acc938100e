"""``--output-format json`` (and ``--report FILE``): the versioned report documented in
docs/output-formats.md. Bump :data:`SCHEMA_VERSION` on any change that can break a
reader (a renamed or removed key, a changed meaning); adding keys does not.
"""

from __future__ import annotations

import json

from npu_migrate import __version__
from npu_migrate.pipeline.model import FileResult, Finding, Fix
from npu_migrate.pipeline.registry import impact_of
from npu_migrate.reporting.printable import json_safe
from npu_migrate.reporting.report import Report, findings_by_impact, reason_for

SCHEMA_VERSION = 1


def _span(item: Fix | Finding) -> dict:
    end_line, end_col = item.end
    return {"start": {"line": item.line, "column": item.col + 1},
            "end": {"line": end_line, "column": end_col + 1},
            "cell": item.cell}


def _file(result: FileResult) -> dict:
    return {
        "path": result.path,
        "changed": result.changed,
        "written": result.written,
        "error": result.error,
        "skipped": result.skipped,
        "fixes": [{"rule": f.rule, "message": f.message, "reason": reason_for(f, result.rule_notes), "applied": result.written, **_span(f)}
                  for f in result.fixes],
        "findings": [{"rule": f.rule, "message": f.message, "suggestion": f.suggestion,
                      "impact": impact_of(f.rule, result.rule_notes), **_span(f)}
                     for f in result.findings],
    }


def as_dict(report: Report) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "npu-migrate", "version": __version__},
        "mode": report.mode,
        "files": [_file(r) for r in report.results],
        "summary": {**report.summary, "findings_by_impact": findings_by_impact(report.results)},
    }


def render(report: Report) -> str:
    return json_safe(json.dumps(as_dict(report), indent=2, ensure_ascii=False)) + "\n"
