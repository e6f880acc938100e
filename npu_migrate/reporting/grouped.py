"""``--output-format grouped``: the text format with findings listed under their file
(``ruff --output-format grouped``)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from npu_migrate.reporting import text
from npu_migrate.reporting.printable import printable
from npu_migrate.reporting.report import Report


def write(report: Report, console: Console) -> None:
    if report.statistics:  # counts only: the text format's table
        text.write(report, console)
        return
    for result in report.results:
        lines = text.diagnostics(result, report.show_fixes, with_path=False)
        if result.error is not None:
            lines.insert(0, Text(f"error: {printable(result.error)}", style="red"))
        elif report.mode == "check" and result.changed:
            lines.insert(0, Text("would migrate"))
        if not lines:
            continue
        console.print(Text(f"{printable(result.path)}:", style="bold underline"), soft_wrap=True, highlight=False)
        for line in lines:
            console.print(Text("  ") + line, soft_wrap=True, highlight=False)
        console.print()
    text.summary(report, console)
