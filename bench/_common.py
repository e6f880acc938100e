"""Shared helpers for the bench scripts: how to call npu-migrate, and timed runs.

Running this file directly is the measuring wrapper used by :func:`measure`::

    python bench/_common.py --measure -- CMD...

It runs CMD once and prints one JSON line with the exit status, the wall time of
CMD alone, and the peak resident set size of the largest process in CMD's tree
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``).  A fresh wrapper per measurement is
needed because that counter is a high-water mark over every child a process has
ever waited for: it cannot be reset between runs in one harness process.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"


def npu_migrate_cmd() -> list[str]:
    """The npu-migrate command line; ``$NPU_MIGRATE_CMD`` overrides it (shell-split)."""
    override = os.environ.get("NPU_MIGRATE_CMD")
    if override:
        return shlex.split(override)
    return [sys.executable, "-m", "npu_migrate"]


@dataclass
class Measured:
    returncode: int
    seconds: float       # wall time of the command
    cpu_s: float         # user + system CPU time of the command's whole process tree
    rss_mb: float        # peak RSS of its largest process
    load: float          # 1-minute load average when it finished (other work on the machine)
    stdout: str
    stderr: str


def measure(cmd: list[str], cwd: Path | str | None = None, env: dict | None = None) -> Measured:
    """Run *cmd* under the wrapper; return its status, wall time and peak RSS (MB)."""
    wrapper = [sys.executable, str(Path(__file__).resolve()), "--measure", "--"]
    proc = subprocess.run(wrapper + list(cmd), cwd=cwd, env=env, capture_output=True, text=True,
                          errors="replace")
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"measuring wrapper failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(lines[-1])
    return Measured(data["rc"], data["seconds"], data["cpu_s"], data["maxrss_kb"] / 1024.0, data["load"],
                    "\n".join(lines[:-1]), proc.stderr)


def count_lines(data: bytes) -> int:
    """Physical lines of a file (a last line without a newline counts)."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def ratio(value: float, base: float | None) -> str:
    if not base:
        return "n/a"
    return f"{value / base:.2f}x"


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return "\n".join(out)


def finding_line(entry: dict) -> int | None:
    """The (1-based) line of a fix or finding in an npu-migrate JSON report."""
    return (entry.get("start") or {}).get("line")


def position(entry: dict) -> tuple[int | None, int | None]:
    """(line, column) of a fix or finding in an npu-migrate JSON report, both 1-based."""
    start = entry.get("start") or {}
    return start.get("line"), start.get("column")


def load_report(path: Path) -> dict:
    """Read an npu-migrate JSON report; index its files by path."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data["by_path"] = {Path(entry["path"]).as_posix(): entry for entry in data.get("files", [])}
    return data


def idempotency_failures(second: dict, returncode: int) -> list[str]:
    """The files a ``--check`` run on the output still marks changed (``second``: its
    report by path)."""
    failed = sorted(path for path, entry in second.items() if entry.get("changed"))
    if returncode == 1 and not failed:
        failed = ["(--check exited 1 but its report marks no file changed)"]
    return failed


def tally(report: dict, fixes, findings, errors: list) -> None:
    """Count a report's fixes and findings by rule (into two Counters) and collect its
    files' errors as ``(path, error)``."""
    for entry in report.values():
        for fix in entry.get("fixes") or []:
            fixes[fix.get("rule", "?")] += 1
        for finding in entry.get("findings") or []:
            findings[finding.get("rule", "?")] += 1
        if entry.get("error"):
            errors.append((Path(entry["path"]).as_posix().removeprefix("./"), str(entry["error"])))


def _wrapper_main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "--measure" or argv[1] != "--":
        print("usage: _common.py --measure -- CMD...", file=sys.stderr)
        return 2
    cmd = argv[2:]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True)
    seconds = time.perf_counter() - start
    sys.stderr.buffer.write(proc.stderr[-20000:])
    sys.stdout.buffer.write(proc.stdout[-20000:])
    if proc.stdout and not proc.stdout.endswith(b"\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    maxrss_kb = usage.ru_maxrss / 1024 if sys.platform == "darwin" else usage.ru_maxrss
    print(json.dumps({"rc": proc.returncode, "seconds": seconds, "maxrss_kb": maxrss_kb,
                      "cpu_s": usage.ru_utime + usage.ru_stime, "load": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(_wrapper_main(sys.argv[1:]))
