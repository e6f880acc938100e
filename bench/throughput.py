"""Throughput of npu-migrate against the libcst floor, all measured in one run.

Every row is timed in this one invocation so that the ratios compare runs taken
side by side on the same machine and load:

* floor: ``libcst.parse_module(data).bytes`` for every file, one process;
* npu-migrate dry run with ``--report``, ``--no-cache``, ``--jobs 1`` and ``--jobs 2``;
* npu-migrate with a cache: one populating run, then the timed warm re-run;
* one file, the pre-commit case: wall time including interpreter start;
* ruff ``check --select E9 --no-cache`` over the same tree, for scale.

Each row gives files, lines, seconds, lines/s, the ratio to the floor and the
peak RSS of the largest process of the run. The table is printed and written to
``bench/results/throughput.md``.

    python -m bench.throughput [--projects accelerate,timm] [--sample N]

``$NPU_MIGRATE_CMD`` replaces the npu-migrate command line (default
``python -m npu_migrate``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    REPO_ROOT,
    RESULTS_DIR,
    Measured,
    load_report,
    markdown_table,
    measure,
    npu_migrate_cmd,
)
from bench.corpus import (
    Project,
    default_cache_dir,
    ensure_corpus,
    parse_projects,
    python_files,
)

GOALS = {
    "jobs1": 0.60,   # npu-migrate --jobs 1 <= 0.6 x floor
    "jobs2": 0.35,   # npu-migrate --jobs 2 <= 0.35 x floor
    "warm": 0.05,    # warm re-run <= 5% of the cold --jobs 1 run
    "single_s": 0.5,  # one file, interpreter start included
    "rss_mb": 500.0,  # peak RSS per process
}


@dataclass
class Row:
    name: str
    files: int | None
    lines: int | None
    seconds: float
    rss_mb: float | None
    note: str = ""
    extra: dict = field(default_factory=dict)
    cpu_s: float | None = None
    load: float | None = None

    @classmethod
    def of(cls, name: str, files: int | None, lines: int | None, m: Measured, note: str = "",
           key: str | None = None, **extra) -> Row:
        row = cls(name, files, lines, m.seconds, m.rss_mb, note, dict(extra), m.cpu_s, m.load)
        if key:
            row.extra["key"] = key
        return row

    def lines_per_s(self) -> str:
        if not self.lines or not self.seconds:
            return "n/a"
        return f"{self.lines / self.seconds:,.0f}"


# --------------------------------------------------------------------------- floor

def floor_worker(list_file: Path) -> dict:
    """Parse and regenerate every listed file in this process (the floor)."""
    import libcst

    names = [line for line in Path(list_file).read_text(encoding="utf-8").splitlines() if line]
    errors = 0
    lines = 0
    start = time.perf_counter()
    for name in names:
        data = Path(name).read_bytes()
        lines += data.count(b"\n")
        try:
            _ = libcst.parse_module(data).bytes
        except Exception:  # noqa: BLE001 - count every file libcst rejects
            errors += 1
    return {"files": len(names), "parse_errors": errors, "seconds_in_loop": time.perf_counter() - start}


# --------------------------------------------------------------------------- helpers

def _tool(*args: str) -> list[str]:
    return npu_migrate_cmd() + list(args)


def _targets(projects: list[Project], sample: int) -> tuple[list[str], list[str], int]:
    """(arguments for the tool, every file relative to the corpus src dir, lines)."""
    files: list[str] = []
    lines = 0
    for p in projects:
        for rel in python_files(p.root, sample):
            path = p.root / rel
            files.append(f"{p.root.name}/{rel.as_posix()}")
            lines += _count(path)
    if sample == 1:
        args = [p.root.name for p in projects]  # what a user types: directories
    else:
        args = files
    return args, files, lines


def _source_stamp() -> float:
    """Newest mtime of the engine and rule sources: the tool's cache is keyed on them, so an edit
    between the populating and the warm run (a shared working tree) invalidates the warm figure."""
    stamps = [f.stat().st_mtime for d in ("npu_migrate", "rules") for f in (REPO_ROOT / d).rglob("*.py")]
    return max(stamps, default=0.0)


def _count(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _report_files(report: Path) -> int | None:
    try:
        return len(load_report(report)["files"])
    except (OSError, ValueError, KeyError):
        return None


def _check_rc(m, what: str, allowed=(0,)) -> str:
    if m.returncode in allowed:
        return ""
    tail = (m.stderr or m.stdout).strip().splitlines()[-3:]
    return f"exit {m.returncode}: " + " / ".join(tail)[:200]


def pick_single_file(projects: list[Project], files: list[str], src: Path) -> str:
    """A typical CUDA-using file: the median-sized file among those mentioning cuda."""
    candidates = []
    for rel in files:
        data = (src / rel).read_bytes()
        if b"cuda" in data:
            candidates.append((len(data), rel))
    if not candidates:
        candidates = [((src / rel).stat().st_size, rel) for rel in files]
    candidates.sort()
    return candidates[len(candidates) // 2][1]


# --------------------------------------------------------------------------- main run

def compile_checkout() -> None:
    """Write this checkout's bytecode (``__pycache__``, as ``pip install`` does for an
    installed copy). With ``PYTHONDONTWRITEBYTECODE`` set and none written, every
    npu-migrate process compiled its ~100 modules from source again (about 0.6 s a
    process on the shared benchmark machine), which no installed copy does."""
    import compileall

    for name in ("npu_migrate", "rules"):
        compileall.compile_dir(str(REPO_ROOT / name), quiet=1)


def run(projects: list[Project], sample: int, repeat_single: int = 5, skip: set[str] | None = None,
        log=print) -> tuple[list[Row], dict]:
    skip = skip or set()
    compile_checkout()
    src = projects[0].root.parent
    args, files, lines = _targets(projects, sample)
    rows: list[Row] = []
    meta: dict = {"files": len(files), "lines": lines}
    work = Path(tempfile.mkdtemp(prefix="npu-migrate-throughput-"))
    try:
        list_file = work / "files.txt"
        list_file.write_text("\n".join(files) + "\n", encoding="utf-8")

        log(f"corpus: {len(files):,} files, {lines:,} lines under {src}")
        if "floor" not in skip:
            log("floor: libcst parse + codegen, 1 process ...")
            m = measure([sys.executable, str(Path(__file__).resolve()), "--floor-worker", str(list_file)], cwd=src)
            info = json.loads(m.stdout.strip().splitlines()[-1]) if m.returncode == 0 else {}
            note = _check_rc(m, "floor") or (f"{info['parse_errors']} files libcst cannot parse"
                                             if info.get("parse_errors") else "")
            rows.append(Row.of("libcst parse+codegen (floor), 1 process", len(files), lines, m, note,
                               key="floor", parse_errors=info.get("parse_errors"),
                               seconds_in_loop=info.get("seconds_in_loop")))

        for jobs in (1, 2):
            key = f"jobs{jobs}"
            if key in skip:
                continue
            log(f"npu-migrate dry run --report --no-cache --jobs {jobs} ...")
            report = work / f"report-j{jobs}.json"
            m = measure(_tool(*args, "--report", str(report), "--no-cache", "--jobs", str(jobs)), cwd=src)
            rows.append(Row.of(f"npu-migrate dry run, --jobs {jobs}, cold (--no-cache)", _report_files(report),
                               lines, m, _check_rc(m, key, (0, 2)), key=key))

        if "warm" not in skip:
            cache = work / "cache"
            log("npu-migrate with cache: populate, then warm re-run (--jobs 1) ...")
            stamp = _source_stamp()
            m1 = measure(_tool(*args, "--report", str(work / "r-pop.json"), "--cache-dir", str(cache),
                               "--jobs", "1"), cwd=src)
            rows.append(Row.of("npu-migrate, cache populate, --jobs 1", _report_files(work / "r-pop.json"), lines,
                               m1, _check_rc(m1, "populate", (0, 2))))
            m2 = measure(_tool(*args, "--report", str(work / "r-warm.json"), "--cache-dir", str(cache),
                               "--jobs", "1"), cwd=src)
            rows.append(Row.of("npu-migrate, warm re-run (cache), --jobs 1", _report_files(work / "r-warm.json"),
                               lines, m2, _check_rc(m2, "warm", (0, 2))
                               or ("INVALID: engine/rule sources were edited during the run"
                                   if _source_stamp() != stamp else ""), key="warm"))

        if "single" not in skip:
            one = pick_single_file(projects, files, src)
            log(f"single file, {repeat_single} runs: {one} ...")
            runs = [measure(_tool(one, "--no-cache"), cwd=src) for _ in range(max(1, repeat_single))]
            times = [m.seconds for m in runs]
            median = Measured(runs[-1].returncode, statistics.median(times),
                              statistics.median(m.cpu_s for m in runs), max(m.rss_mb for m in runs),
                              max(m.load for m in runs), "", "")
            rows.append(Row.of(f"npu-migrate one file (median of {len(runs)}, incl. interpreter start)", 1,
                               _count(src / one), median,
                               _check_rc(runs[-1], "single", (0, 1, 2)) or f"`{one}`, min {min(times):.3f} s",
                               key="single"))
            meta["single_file"] = one

        if "ruff" not in skip:
            ruff = shutil.which("ruff")
            if ruff is None:
                rows.append(Row("ruff check --select E9 --no-cache", None, None, 0.0, None,
                                "skipped: ruff is not installed (pip install ruff)"))
            else:
                log("ruff check --select E9 ...")
                version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip()
                shown = subprocess.run([ruff, "check", "--isolated", "--show-files", *args],
                                       cwd=src, capture_output=True, text=True).stdout
                n_ruff = sum(1 for line in shown.splitlines() if line.strip().endswith(".py"))
                m = measure([ruff, "check", "--isolated", "--select", "E9", "--no-cache", "--quiet", *args], cwd=src)
                rows.append(Row.of(f"ruff check --select E9 --no-cache ({version})", n_ruff, lines, m,
                                   _check_rc(m, "ruff", (0, 1)), key="ruff"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows, meta


def render(rows: list[Row], meta: dict, projects: list[Project], sample: int) -> str:
    floor_row = next((r for r in rows if r.extra.get("key") == "floor"), None)
    floor = floor_row.seconds if floor_row else None
    floor_cpu = floor_row.cpu_s if floor_row else None
    cold1 = next((r.seconds for r in rows if r.extra.get("key") == "jobs1"), None)
    table = []
    for r in rows:
        table.append([r.name, "" if r.files is None else f"{r.files:,}", "" if r.lines is None else f"{r.lines:,}",
                      f"{r.seconds:.2f}" if r.seconds else "", "" if r.cpu_s is None else f"{r.cpu_s:.2f}",
                      r.lines_per_s(),
                      f"{r.seconds / floor:.3f}x" if floor and r.seconds else "n/a",
                      f"{r.cpu_s / floor_cpu:.3f}x" if floor_cpu and r.cpu_s else "n/a",
                      "" if r.rss_mb is None else f"{r.rss_mb:.0f}",
                      "" if r.load is None else f"{r.load:.1f}", r.note])
    text = [
        "# npu-migrate throughput",
        "",
        f"Corpus: {', '.join(p.label for p in projects)}"
        + (f"; one file in {sample}" if sample > 1 else "") + f" ({meta['files']:,} files, {meta['lines']:,} lines).",
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}; "
        f"measured {time.strftime('%Y-%m-%d %H:%M')}. Tool: `{' '.join(os.path.basename(c) if c == sys.executable else c for c in npu_migrate_cmd())}`.",
        "",
        markdown_table(["run", "files", "lines", "wall s", "CPU s", "lines/s (wall)", "wall vs floor",
                        "CPU vs floor", "peak RSS MB", "load", "note"], table),
        "",
        "Goals:",
    ]
    goals = []
    by_key = {r.extra.get("key"): r for r in rows if r.extra.get("key")}
    if floor:
        for key, label in (("jobs1", "--jobs 1"), ("jobs2", "--jobs 2")):
            if key in by_key:
                val = by_key[key].seconds / floor
                goals.append(f"- {label}: {val:.3f}x floor (goal <= {GOALS[key]}x): "
                             f"{'met' if val <= GOALS[key] else 'NOT met'}")
    if "warm" in by_key and by_key["warm"].note.startswith("INVALID"):
        goals.append("- warm re-run: not evaluated, the engine or rule sources changed between the two runs")
    elif "warm" in by_key and cold1:
        val = by_key["warm"].seconds / cold1
        goals.append(f"- warm re-run: {val:.1%} of the cold --jobs 1 run (goal <= {GOALS['warm']:.0%}): "
                     f"{'met' if val <= GOALS['warm'] else 'NOT met'}")
    if "single" in by_key:
        val = by_key["single"].seconds
        goals.append(f"- one file: {val:.3f} s (goal < {GOALS['single_s']} s): "
                     f"{'met' if val < GOALS['single_s'] else 'NOT met'}")
    tool_rss = [r.rss_mb for r in rows if r.name.startswith("npu-migrate") and r.rss_mb is not None]
    if tool_rss:
        val = max(tool_rss)
        goals.append(f"- peak RSS of any npu-migrate process: {val:.0f} MB (goal <= {GOALS['rss_mb']:.0f} MB): "
                     f"{'met' if val <= GOALS['rss_mb'] else 'NOT met'}")
    text += goals or ["- (no goal could be evaluated)"]
    text += [
        "",
        "Wall s is the wall time of the command (interpreter start included); CPU s is the user + system "
        "time of its whole process tree, which other load on the machine disturbs much less (but it does "
        "not show what --jobs 2 gains). Peak RSS is `getrusage(RUSAGE_CHILDREN).ru_maxrss` taken in a fresh "
        "wrapper process, i.e. the largest single process of the run (the parent or one worker). Load is "
        "the 1-minute load average when the run ended: above the CPU count, wall times are inflated.",
    ]
    return "\n".join(text) + "\n"


README_START = "<!-- bench.throughput: start (written by python -m bench.throughput) -->"
README_END = "<!-- bench.throughput: end -->"


def readme_block(text: str) -> str:
    """The table and the goal verdicts of a rendered report (what goes into the README)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| run |"))
    goals = lines.index("Goals:")
    last = goals + 1
    while last < len(lines) and lines[last].startswith("- "):
        last += 1
    corpus = next(line for line in lines if line.startswith("Corpus:"))
    machine = next(line for line in lines if line.startswith("Machine:"))
    return "\n".join([corpus, machine, "", *lines[first:last]])


def update_readme(readme: str, block: str) -> str:
    """``readme`` with the text between the throughput markers replaced by ``block``."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {README_START!r} ... {README_END!r} block")
    return readme[: start + len(README_START)] + "\n" + block + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--floor-worker"]:
        print(json.dumps(floor_worker(Path(argv[1]))))
        return 0
    ap = argparse.ArgumentParser(description="npu-migrate throughput against the libcst floor")
    ap.add_argument("--projects", help="comma-separated subset, e.g. accelerate,timm")
    ap.add_argument("--sample", type=int, default=1, help="take every Nth file (default 1: all)")
    ap.add_argument("--cache-dir", type=Path, default=None, help=f"corpus cache (default {default_cache_dir()})")
    ap.add_argument("--skip", default="", help="rows to leave out: floor,jobs1,jobs2,warm,single,ruff")
    ap.add_argument("--repeat-single", type=int, default=5)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "throughput.md")
    ap.add_argument("--readme", type=Path, default=None,
                    help="write the table into this README's throughput block "
                         "(default: README.md for a whole-corpus run; never for --sample/--projects)")
    ap.add_argument("--no-readme", action="store_true", help="leave the README alone")
    args = ap.parse_args(argv)
    projects = ensure_corpus(parse_projects(args.projects), args.cache_dir)
    if not projects:
        print("no project could be downloaded", file=sys.stderr)
        return 2
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    rows, meta = run(projects, args.sample, args.repeat_single, skip, log=lambda m: print(m, file=sys.stderr))
    text = render(rows, meta, projects, args.sample)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {args.output}", file=sys.stderr)
    readme = args.readme
    if readme is None and args.sample == 1 and not args.projects:
        readme = REPO_ROOT / "README.md"
    if readme is not None and not args.no_readme:
        readme.write_text(update_readme(readme.read_text(encoding="utf-8"), readme_block(text)), encoding="utf-8")
        print(f"table written into {readme}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
