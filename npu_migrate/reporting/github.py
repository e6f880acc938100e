"""``--output-format github``: GitHub Actions workflow commands, one per line
(``::warning file=train.py,line=3,col=5,endLine=3,endColumn=20,title=NPU102::...``),
which the Actions runner turns into annotations on the pull request. Findings (and
file errors) only, unless ``--show-fixes``."""

from __future__ import annotations

from collections import Counter

from npu_migrate.reporting.printable import printable
from npu_migrate.reporting.report import Annotation, Report

_COMMAND = {"error": "error", "warning": "warning", "note": "notice"}


def _data(value: str) -> str:
    # the line ends GitHub decodes back; every other control escaped (an ESC in a name reaches the log raw)
    return printable(value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _property(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def line(a: Annotation) -> str:
    props = [f"file={_property(a.path)}"]
    if a.line is not None:
        props += [f"line={a.line}", f"col={a.col}", f"endLine={a.end_line}", f"endColumn={a.end_col}"]
    title = a.rule or "npu-migrate"
    if a.cell is not None:
        title += f" (cell {a.cell})"
    props.append(f"title={_property(title)}")
    message = a.message if not a.suggestion else f"{a.message}\nsuggestion: {a.suggestion}"
    return f"::{_COMMAND[a.level]} {','.join(props)}::{_data(message)}"


def render(report: Report) -> str:
    """Findings and file errors; every fix too with ``--show-fixes``. GitHub shows only the
    first few annotations of a step, so (as ruff's ``github`` format) the fixes, which
    need no person, do not push the findings out of sight by default. Under ``--check``
    each file with pending fixes gets one error annotation (the reason the run fails)."""
    lines = []
    for a in report.annotations():
        if a.kind != "fix" or report.show_fixes:
            lines.append(line(a))
    if report.mode == "check" and not report.show_fixes:
        for result in report.results:
            if result.changed and not result.written and result.error is None:
                counts = Counter(f.rule for f in result.fixes)
                rules = ", ".join(f"{rule} x{n}" for rule, n in sorted(counts.items()))
                lines.append(line(Annotation(result.path, "fix", "error", None,
                                             f"{len(result.fixes)} automatic fix(es) pending ({rules}): "
                                             f"run npu-migrate --write", line=1, col=1, end_line=1, end_col=1)))
    return "".join(text + "\n" for text in lines)
