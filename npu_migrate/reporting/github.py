"""``--output-format github``: GitHub Actions workflow commands, one per line
(``::warning file=train.py,line=3,col=5,endLine=3,endColumn=20,title=NPU102::...``),
which the Actions runner turns into annotations on the pull request."""

from __future__ import annotations

from npu_migrate.reporting.report import Annotation, Report

_COMMAND = {"error": "error", "warning": "warning", "note": "notice"}


def _data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


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
    return "".join(line(a) + "\n" for a in report.annotations())
