"""``--output-format markdown``: a readiness summary for a team lead, a pull request
comment or ``$GITHUB_STEP_SUMMARY`` / a GitLab job summary.

Conversion statistics in the spirit of HIPIFY's (files, references converted by an
automatic fix and left for a person, lines changed), the findings grouped by their
rule's impact class (blocking / review / informational, ``RuleBase.impact``) with each
rule's suggestion once, counts per directory, and what to install on the training
image. No diff: ``--diff`` prints one.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from pathlib import Path, PurePath

from npu_migrate.reporting.printable import printable
from npu_migrate.reporting.report import Report

_TITLES = {
    "blocking": "Blocking: the code cannot train on NPU until these are handled",
    "review": "Review: a person should look at these",
    "informational": "Informational: left as they are on purpose",
}
_SHOWN_PLACES = 5


def _cell(text: str) -> str:
    return printable(" ".join(text.split())).replace("|", "\\|")


def _name(path: str) -> str:
    """A file or directory name in a table cell: controls escaped, ``|`` too."""
    return printable(path).replace("|", "\\|")


def _line_counts(report: Report) -> tuple[int, int, int]:
    """(lines added, lines removed, lines in the changed files before the change), over
    the files whose original is still on disk (a dry run or --check)."""
    added = removed = total = 0
    for result in report.results:
        if not result.changed or result.written or result.error is not None:
            continue
        try:
            old = Path(result.path).read_bytes().decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        new = result.new_source.decode("utf-8", "replace").splitlines()
        total += len(old)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag != "equal":
                removed += i2 - i1
                added += j2 - j1
    return added, removed, total


def render(report: Report) -> str:
    from npu_migrate.pipeline.registry import all_rules

    rules = all_rules()
    s = report.summary
    impact = {rid: rule.impact for rid, rule in rules.items()}
    by_impact: dict[str, dict[str, list[tuple[str, int]]]] = defaultdict(lambda: defaultdict(list))
    suggestion: dict[str, str] = {}
    directories: dict[str, Counter[str]] = defaultdict(Counter)
    for result in report.results:
        directory = str(PurePath(result.path).parent)
        directories[directory]["fixes"] += len(result.fixes)
        directories[directory]["errors"] += result.error is not None
        for f in result.findings:
            cls = impact.get(f.rule, "review")
            by_impact[cls][f.rule].append((result.path, f.line))
            suggestion.setdefault(f.rule, f.suggestion)
            directories[directory][cls] += 1

    out = ["## npu-migrate: readiness for Ascend NPU", ""]
    counts = {cls: sum(len(v) for v in by_impact[cls].values()) for cls in _TITLES}
    verdict = ("**Not ready**: blocking findings left." if counts["blocking"] else
               "**Ready to try** once the automatic fixes are applied." if report.pending else
               "**Ready to try**: nothing blocks training on NPU.")
    out += [verdict, "", "| | |", "|---|---|",
            f"| Files scanned | {s['files_scanned']} |",
            f"| Files the migration changes | {s['files_changed']} ({s['files_written']} written) |",
            f"| References converted automatically (fixes) | {s['fixes']} |",
            (f"| References left for a person (findings) | {s['findings']}: {counts['blocking']} blocking, "
             f"{counts['review']} review, {counts['informational']} informational |")]
    added, removed, total = _line_counts(report)
    if total:
        out.append(f"| Lines changed (files still unwritten) | +{added} -{removed} "
                   f"({(added + removed) / max(total, 1):.1%} of their {total} lines) |")
    if s["files_failed"]:
        out.append(f"| Files that could not be processed | {s['files_failed']} |")
    out.append("")
    for cls, title in _TITLES.items():
        if not by_impact[cls]:
            continue
        out += [f"### {title} ({counts[cls]})", "", "| Rule | Count | Where | What to do |", "|---|---|---|---|"]
        for rid, places in sorted(by_impact[cls].items(), key=lambda kv: (-len(kv[1]), kv[0])):
            name = rules[rid].name if rid in rules else ""
            where = ", ".join(f"`{_name(p)}:{line}`" for p, line in places[:_SHOWN_PLACES])
            if len(places) > _SHOWN_PLACES:
                where += f" and {len(places) - _SHOWN_PLACES} more"
            out.append(f"| {rid} {name} | {len(places)} | {where} | {_cell(suggestion.get(rid, ''))} |")
        out.append("")
    if s["fixes_by_rule"]:
        out += ["### Automatic fixes by rule", "", "| Rule | Fixes |", "|---|---|"]
        out += [f"| {rid} {rules[rid].name if rid in rules else ''} | {n} |" for rid, n in s["fixes_by_rule"].items()]
        out.append("")
    if len(directories) > 1:
        out += ["### By directory", "", "| Directory | Fixes | Blocking | Review | Informational |",
                "|---|---|---|---|---|"]
        for directory, c in sorted(directories.items()):
            out.append(f"| `{_name(directory)}` | {c['fixes']} | {c['blocking']} | {c['review']} | {c['informational']} |")
        out.append("")
    out += ["### What to install on the training image", ""]
    out += _install_lines(report)
    return "\n".join(out) + "\n"


def _install_lines(report: Report) -> list[str]:
    sources = [r.new_source or b"" for r in report.results if r.changed]
    lines = [("- `torch_npu` of the same X.Y as `torch` (torch 2.13 pairs with torch-npu 2.13), and the CANN "
              "release its notes name; `npu-migrate preflight` checks a node.")]
    if any(b"import npu_runtime" in src for src in sources):
        lines.append("- `npu-runtime`: the migrated entry points import `npu_runtime` (distributed set-up, "
                     "durable checkpoints, the hang watchdog).")
    return lines
