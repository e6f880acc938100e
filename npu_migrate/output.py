"""Terminal output: unified diffs (difflib, coloured by rich), findings, the summary.

Diffs go to stdout, so ``npu-migrate src > migration.patch`` gives a patch that
``git apply`` accepts. Everything else goes to stderr.
"""

from __future__ import annotations

import difflib
import io
import tokenize
from collections import Counter

from rich.console import Console
from rich.text import Text

from npu_migrate.model import FileResult

_STYLES = {"+": "green", "-": "red", "@": "cyan"}


def _decode(data: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("latin-1")


def unified_diff(path: str, old: bytes | None, new: bytes) -> str:
    """A git-style diff; ``old=None`` is a new file (``--- /dev/null``)."""
    lines = difflib.unified_diff(
        _decode(old or b"").splitlines(keepends=True),
        _decode(new).splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path.lstrip('/')}",
        tofile=f"b/{path.lstrip('/')}",
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


def print_diff(console: Console, diff: str) -> None:
    for line in diff.splitlines():
        style = "bold" if line.startswith(("---", "+++")) else _STYLES.get(line[:1])
        console.print(Text(line.rstrip("\r"), style=style or ""), soft_wrap=True, highlight=False)


def print_findings(console: Console, results: list[FileResult], verbose: bool) -> None:
    for result in results:
        for f in result.findings:
            line = Text()
            line.append(f"{result.path}:{f.line}:{f.col + 1}: ", style="bold")
            line.append(f.rule, style="yellow")
            line.append(f" {f.message}")
            console.print(line, soft_wrap=True, highlight=False)
            if verbose and f.suggestion:
                console.print(Text(f"    suggestion: {f.suggestion}", style="dim"), soft_wrap=True, highlight=False)


def summarise(results: list[FileResult]) -> dict:
    fixes = Counter(f.rule for r in results for f in r.fixes)
    findings = Counter(f.rule for r in results for f in r.findings)
    return {
        "files_scanned": len(results),
        "files_changed": sum(r.changed for r in results),
        "files_failed": sum(r.error is not None for r in results),
        "fixes": sum(fixes.values()),
        "findings": sum(findings.values()),
        "fixes_by_rule": dict(sorted(fixes.items())),
        "findings_by_rule": dict(sorted(findings.items())),
    }


def print_summary(console: Console, summary: dict, mode: str) -> None:
    verb = {"write": "changed", "check": "would change", "diff": "would change"}[mode]
    console.print(
        f"{summary['files_scanned']} file(s) scanned, {summary['files_changed']} {verb}, "
        f"{summary['fixes']} fix(es), {summary['findings']} finding(s) need manual work, "
        f"{summary['files_failed']} failed.",
        highlight=False,
        soft_wrap=True,
    )
    if summary["fixes_by_rule"]:
        console.print(
            "  fixes:    " + ", ".join(f"{k} x{v}" for k, v in summary["fixes_by_rule"].items()), highlight=False, soft_wrap=True
        )
    if summary["findings_by_rule"]:
        console.print(
            "  findings: " + ", ".join(f"{k} x{v}" for k, v in summary["findings_by_rule"].items()), highlight=False, soft_wrap=True
        )
