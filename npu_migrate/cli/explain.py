"""``npu-migrate explain FILE:LINE``: which rules touch a line, and why.

The file is migrated in memory (nothing is written) with the project's own
configuration, and every fix and finding on that line is printed with its
evidence (``Fix.reason``, else the rule's summary) or its suggestion. The lines
that NPU010 (already NPU-aware) and NPU011 (CUDA test in front of CUDA-only code)
leave alone are findings of those rules, so "why was this line *not* changed" is
answered the same way.

After ``--write`` the file holds the migrated code, on which nothing is left to
do. When the file is tracked by git, differs from ``HEAD`` and has no fix of its
own on the line (findings such as NPU109 stay after migration), the version in
``HEAD`` is migrated instead and its positions are moved onto the file as it is
now (``npu_migrate/reporting/relocate.py``), so the line number is the one the
user sees in their editor.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from npu_migrate.pipeline.model import FileResult

_LOCATION = re.compile(r"(?P<path>.+?):(?P<line>\d+)(?::\d+)?")


class ExplainError(Exception):
    """A bad location or an unreadable file: one line, exit 2."""


@dataclass
class Explained:
    path: str
    line: int
    text: str  # the line as it is in the file now
    result: FileResult
    source: str  # "the file" or "git HEAD"


def parse_location(location: str) -> tuple[str, int]:
    match = _LOCATION.fullmatch(location)
    if match is None or int(match["line"]) < 1:
        raise ExplainError(f"{location!r}: expected FILE:LINE (a 1-based line number)")
    return match["path"], int(match["line"])


def _git_head(path: Path) -> bytes | None:
    """The file's bytes in git HEAD, or None (not in a repository, untracked, no git)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path.parent, capture_output=True,
                             text=True, timeout=30, check=False)
        if top.returncode != 0:
            return None
        relative = path.resolve().relative_to(Path(top.stdout.strip()).resolve()).as_posix()
        shown = subprocess.run(["git", "show", f"HEAD:{relative}"], cwd=top.stdout.strip(), capture_output=True,
                               timeout=30, check=False)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return shown.stdout if shown.returncode == 0 else None


def explain(location: str, settings) -> Explained:
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.reporting.relocate import relocate, split_for

    name, line = parse_location(location)
    path = Path(name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ExplainError(f"{name}: cannot read: {exc.strerror or exc}") from None
    lines = data.decode("utf-8", errors="replace").splitlines()
    if line > len(lines):
        raise ExplainError(f"{name}:{line}: the file has {len(lines)} line(s)")
    result = migrate_safely(name, data, settings)
    source = "the file"
    # A finding left on a migrated line (NPU109 on `x.double().npu()`) does not mean
    # nothing was fixed there: the fixes are only seen in the version before --write.
    if result.error is None and not _on_line(result.fixes, line):
        head = _git_head(path)
        if head is not None and head != data:
            earlier = migrate_safely(name, head, settings)
            if earlier.error is None and (earlier.fixes or earlier.findings):
                moved = relocate(earlier, head, data, split_for(name))
                if _on_line(moved.fixes, line) or not _on_line([*result.fixes, *result.findings], line):
                    result = moved
                    source = "git HEAD"
    return Explained(name, line, lines[line - 1], result, source)


def _on_line(items, line: int) -> bool:
    return any(item.line <= line <= item.end[0] for item in items)


def render(explained: Explained) -> list[str]:
    """The lines ``explain`` prints."""
    from npu_migrate.pipeline.registry import all_rules
    from npu_migrate.reporting.report import reason_for

    rules = all_rules()
    out = [f"{explained.path}:{explained.line}: {explained.text.strip()}"]
    result = explained.result
    if result.error is not None:
        out.append(f"  cannot migrate this file: {result.error}")
        return out
    items = [(f, True) for f in result.fixes] + [(f, False) for f in result.findings]
    items = [(item, fix) for item, fix in items if item.line <= explained.line <= item.end[0]]
    if not items:
        out.append("  no rule changes or reports anything on this line")
        return out
    if explained.source != "the file":
        out.append(f"  (the file as it is in {explained.source}, migrated now; positions moved to the file on disk)")
    for item, fix in sorted(items, key=lambda pair: (pair[0].col, pair[0].rule)):
        rule = rules.get(item.rule)
        name = f" ({rule.name})" if rule is not None else ""
        kind = "fix" if fix else "left for you" if item.rule not in ("NPU010", "NPU011") else "left unchanged"
        out.append(f"  {item.rule}{name} [{kind}] column {item.col + 1}: {item.message}")
        if fix:
            out.append(f"    why: {reason_for(item)}")
        elif item.suggestion:
            out.append(f"    suggestion: {item.suggestion}")
    return out
