"""The default output: one line per finding (``path:line:col: NPUxxx message``) with
its suggestion below it, then the summary. ``--statistics`` prints counts per rule
instead of the lines; ``--show-fixes`` adds a line per fix. Columns are 1-based.

Printed to stderr on a terminal (stdout carries the diff), or to ``--output-file``
without colours.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.text import Text

from npu_migrate.pipeline.model import FileResult
from npu_migrate.reporting.printable import printable
from npu_migrate.reporting.report import Report, findings_by_impact, reason_for

_VERB = {"write": "changed", "check": "would change", "dry-run": "would change", "stdin": "changed"}


def place(path: str, item) -> str:
    """``path:line:col`` (1-based column), ``path:cell N:line:col`` in a notebook."""
    cell = f"cell {item.cell}:" if item.cell is not None else ""
    return f"{printable(path)}:{cell}{item.line}:{item.col + 1}"


def fix_state(result: FileResult) -> str:
    return "fixed" if result.written else "fixable"


def write(report: Report, console: Console) -> None:
    if report.statistics:  # counts only, as ruff's --statistics: errors, the files written, the table
        for result in report.results:
            if result.error is not None:
                console.print(f"error: {printable(result.error)}", soft_wrap=True, highlight=False)
            elif result.written and report.mode == "write":
                console.print(f"wrote: {printable(result.path)}", soft_wrap=True, highlight=False)
        statistics(report, console)
    else:
        _file_lines(report, console)
        for result in report.results:
            for text in diagnostics(result, report.show_fixes):
                console.print(text, soft_wrap=True, highlight=False)
    summary(report, console)


def _file_lines(report: Report, console: Console) -> None:
    for result in report.results:
        if result.error is not None:
            console.print(f"error: {printable(result.error)}", soft_wrap=True, highlight=False)
        elif result.written and report.mode == "write":  # every file --write wrote is named, verbose or not
            console.print(f"wrote: {printable(result.path)}", soft_wrap=True, highlight=False)
        elif report.mode == "check" and result.changed:
            console.print(f"would migrate: {printable(result.path)}", soft_wrap=True, highlight=False)
        elif report.verbose:
            state = "would migrate" if result.changed else "unchanged"
            console.print(f"{state}: {printable(result.path)}", soft_wrap=True, highlight=False)


def diagnostics(result: FileResult, show_fixes: bool, with_path: bool = True) -> list[Text]:
    """The lines for one file's findings (and fixes, with ``show_fixes``); each starts
    with ``path:line:col``, or ``line:col`` only when not ``with_path``."""
    items = [(f, None) for f in result.findings]
    if show_fixes:
        items += [(f, fix_state(result)) for f in result.fixes]
    lines = []
    for item, state in sorted(items, key=lambda pair: (pair[0].cell or 0, pair[0].line, pair[0].col)):
        where = place(result.path, item) if with_path else place("", item)[1:]
        line = Text()
        line.append(f"{where}: ", style="bold")
        line.append(item.rule, style="yellow" if state is None else "green")
        if state is not None:
            line.append(f" [{state}]", style="green")
        line.append(f" {printable(item.message)}")
        lines.append(line)
        if state is None and item.suggestion:
            lines.append(Text(f"    suggestion: {printable(item.suggestion)}", style="dim"))
        elif state is not None:
            lines.append(Text(f"    why: {printable(reason_for(item, result.rule_notes))}", style="dim"))
    return lines


def statistics(report: Report, console: Console) -> None:
    """Counts per rule, most frequent first, as ``ruff --statistics`` prints them."""
    from npu_migrate.pipeline.registry import all_rules

    rules = all_rules()
    counts: Counter[tuple[str, str]] = Counter()
    for result in report.results:
        counts.update((f.rule, fix_state(result)) for f in result.fixes)
        counts.update((f.rule, "manual") for f in result.findings)
    width = max((len(str(n)) for n in counts.values()), default=1)
    for (rule, state), count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        name = rules[rule].name if rule in rules else ""
        console.print(f"{count:>{width}}  {rule}  {state:<8} {name}", highlight=False, soft_wrap=True)


def runtime_line(report: Report) -> str | None:
    """What the summary says about npu-runtime: which files declare it (NPU854/NPU862
    fixes), or that nothing does and it must be installed (NPU854 on a Python file)."""
    from npu_migrate.pipeline import declared

    declaring = sorted({r.path for r in report.results
                        for f in r.fixes if f.rule in declared.DECLARING_RULES})
    missing = any(f.rule == declared.RULE and r.path.endswith(".py") for r in report.results for f in r.findings)
    if not declaring and not missing:
        return None
    from npu_migrate.pipeline import runtime_bundle

    requirement = runtime_bundle.requirement()
    if declaring:
        verb = "added to" if report.mode in ("write", "stdin") else "to add to"
        return f"npu-runtime: the migrated code imports npu_runtime; {requirement} {verb} {printable(', '.join(declaring))}"
    return (f"npu-runtime: the migrated code imports npu_runtime and no dependency file declares it: "
            f"install {requirement} where the job runs")


def summary(report: Report, console: Console) -> None:
    s = report.summary
    # Informational findings (code left as it is on purpose: NPU010's branches that
    # already handle the NPU, NPU602's flags without effect) need no work; they are
    # counted on their own, and only when there are some.
    informational = findings_by_impact(report.results)["informational"]
    notes = f", {informational} informational" if informational else ""
    console.print(
        f"{s['files_scanned']} file(s) scanned, {s['files_changed']} {_VERB[report.mode]}, "
        f"{s['fixes']} fix(es), {s['findings'] - informational} finding(s) need manual work{notes}, "
        f"{s['files_failed']} failed.",
        highlight=False, soft_wrap=True,
    )
    if s.get("files_skipped_data"):
        console.print(f"  {s['files_skipped_data']} data file(s) skipped (results, metrics, datasets: "
                      "docs/decisions.md, \"Data files\")", highlight=False, soft_wrap=True)
    if s.get("files_skipped_template"):
        console.print(f"  {s['files_skipped_template']} template file(s) skipped (Helm charts, Jinja and Go templates: "
                      "docs/decisions.md, \"Templates\")", highlight=False, soft_wrap=True)
    runtime = runtime_line(report)
    if runtime:
        console.print(f"  {runtime}", highlight=False, soft_wrap=True)
    from npu_migrate.reporting.runtime_hint import install_hint

    hint = install_hint(report)
    if hint:
        console.print(f"  {hint}", highlight=False, soft_wrap=True)
    for label, key in (("fixes:   ", "fixes_by_rule"), ("findings:", "findings_by_rule")):
        if s[key] and not report.statistics:  # --statistics printed them as a table
            console.print(f"  {label} " + ", ".join(f"{k} x{v}" for k, v in s[key].items()), highlight=False, soft_wrap=True)
    if report.pending and report.mode in ("dry-run", "check"):
        what = "This was a dry run: nothing was written." if report.mode == "dry-run" else "Nothing was written."
        console.print(f"{what} Run again with --write to apply the changes.", highlight=False, soft_wrap=True)
    if report.verbose and report.elapsed is not None:
        console.print(f"took {report.elapsed:.2f}s", highlight=False)
