"""Signals during ``--write`` on a real corpus: nothing half-written, no edit lost, no hang.

Each run copies the corpus to a scratch directory and starts
``npu-migrate --write --no-cache --jobs N`` on it, while an "editor" appends
a line to a few files that the run will migrate. Then, by turns:

* Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or
  SIGKILL (to the parent process alone: its workers are orphaned);
* while files are being migrated (a random moment before the first file is
  replaced), or while they are being written (a moment after that). A run that
  ends before its signal is run again, signalled sooner.

After the run every file must be whole: its original bytes, or exactly what a
clean run writes (with the editor's line, where it made one). Then:

* **partial**: files that are neither (a half-written or mixed file);
* **lost edits**: files the editor changed whose change is gone;
* **hangs**: runs that did not end within 30 s of the signal, and workers that
  outlived their parent by more than 5 s;
* for Ctrl-C: the exit code (130), the time from the signal to the exit, and
  whether the "interrupted: N file(s) written" line counts exactly the files
  found written, none of them written after the signal;
* the temp files left behind, and whether the next run (a plain ``--write``)
  removes them and finishes the migration (every file as a clean run writes it).

    python -m bench.faults [--projects accelerate,timm,lightning] [--runs 20] [--jobs 2]

Writes ``bench/results/faults.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS_DIR, markdown_table, npu_migrate_cmd
from bench.corpus import ensure_corpus, parse_projects

DEFAULT_PROJECTS = "accelerate,timm,lightning"
EDIT = b"# edited while npu-migrate was running\n"
HANG_AFTER_S = 30.0
ORPHAN_GRACE_S = 5.0
_WRITTEN = re.compile(r"interrupted: (\d+) file\(s\) written before the interrupt, none after it")


@dataclass
class Run:
    number: int
    signal: str  # "SIGINT" (group) or "SIGKILL" (parent)
    phase: str  # "migrating" or "writing"
    exit_code: int | None = None
    latency_s: float | None = None  # signal -> exit
    reported: int | None = None  # the "interrupted: N file(s) written" count
    written: int = 0  # files found written (as a clean run writes them)
    written_late: int = 0  # of those, written after the signal
    partial: list[str] = field(default_factory=list)
    lost_edits: list[str] = field(default_factory=list)
    edits: int = 0
    hang: bool = False
    orphans: int = 0
    leftovers: int = 0
    recovered: bool = False
    recovery_note: str = ""


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py")) if p.is_file()}


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _copy(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)


def _reference(pristine: Path, scratch: Path, jobs: int) -> tuple[dict[str, bytes], float]:
    """What a clean ``--write`` makes of every file, and how long it takes."""
    _copy(pristine, scratch)
    start = time.perf_counter()
    proc = subprocess.run([*npu_migrate_cmd(), "--write", "--no-cache", "-q", "--jobs", str(jobs), "."],
                          cwd=scratch, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 2):
        raise SystemExit(f"the reference run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return _files(scratch), seconds


class _Editor(threading.Thread):
    """Appends a line to some of the files the run will change, at random moments."""

    def __init__(self, root: Path, targets: list[str], window_s: float, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.targets = set(targets)
        self.plan = sorted((rng.uniform(0, window_s), name) for name in targets)
        self.edited: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        for at, name in self.plan:
            if self.stop.wait(max(0.0, at - (time.monotonic() - start))):
                return
            with open(self.root / name, "ab") as handle:
                handle.write(EDIT)
            self.edited.append(name)


def _one(run: Run, pristine: Path, scratch: Path, original: dict[str, bytes], expected: dict[str, bytes],
         reference_s: float, jobs: int, edits: int, rng: random.Random, delay_scale: float) -> bool:
    """One run; False if it ended before the signal could be sent."""
    _copy(pristine, scratch)
    changed = [name for name in original if expected[name] != original[name]]
    editor = _Editor(scratch, rng.sample(changed, min(edits, len(changed))), reference_s, rng)
    watched = {name: os.stat(scratch / name).st_mtime_ns for name in changed if name not in editor.targets}
    proc = subprocess.Popen([*npu_migrate_cmd(), "--write", "--no-cache", "--jobs", str(jobs), "."],
                            cwd=scratch, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    editor.start()
    lines: list[str] = []
    first_write = threading.Event()

    def read_stderr() -> None:
        for raw in proc.stderr:
            lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def watch_writes() -> None:  # the first file replaced: the run is writing
        while proc.poll() is None and not first_write.is_set():
            if any(os.stat(scratch / name).st_mtime_ns != stamp for name, stamp in watched.items()):
                first_write.set()
            time.sleep(0.01)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    threading.Thread(target=watch_writes, daemon=True).start()
    if run.phase == "writing":
        first_write.wait(timeout=reference_s * 10 + 60)
        time.sleep(rng.uniform(0.0, 0.05))
    else:  # a random moment before the first write
        first_write.wait(timeout=rng.uniform(0.1, max(0.2, reference_s * delay_scale)))
    run.phase = "writing" if first_write.is_set() else "migrating"
    workers = _children(proc.pid)
    signalled = time.time()
    start = time.monotonic()
    if proc.poll() is not None:  # it was done before the signal: the caller runs it again
        editor.stop.set()
        editor.join()
        reader.join(timeout=10)
        return False
    if run.signal == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGKILL)
    try:
        proc.wait(timeout=HANG_AFTER_S)
        run.latency_s = time.monotonic() - start
    except subprocess.TimeoutExpired:
        run.hang = True
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    run.exit_code = proc.returncode
    reader.join(timeout=10)
    editor.stop.set()
    editor.join()
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    run.orphans = sum(_alive(pid) for pid in workers)
    for pid in workers:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for line in lines:
        match = _WRITTEN.fullmatch(line)
        if match:
            run.reported = int(match.group(1))

    run.edits = len(editor.edited)
    after = _files(scratch)
    for name, data in after.items():
        edited = name in editor.edited
        base = data.replace(EDIT, b"") if edited else data
        if edited and EDIT not in data:
            run.lost_edits.append(name)
        if base == expected[name] and expected[name] != original[name]:
            run.written += 1
            if os.stat(scratch / name).st_mtime > signalled + 0.01 and not edited:
                run.written_late += 1
        elif base != original[name]:
            run.partial.append(name)
    run.leftovers = sum(1 for p in scratch.rglob(".npu-migrate-*.tmp"))

    again = subprocess.run([*npu_migrate_cmd(), "--write", "--no-cache", "-q", "--jobs", str(jobs), "."],
                           cwd=scratch, capture_output=True, text=True, check=False)
    final = _files(scratch)
    wrong = [n for n, data in final.items() if n not in editor.edited and data != expected[n]]
    left = sum(1 for p in scratch.rglob(".npu-migrate-*.tmp"))
    run.recovered = again.returncode in (0, 2) and not wrong and left == 0
    if not run.recovered:
        run.recovery_note = f"exit {again.returncode}, {len(wrong)} file(s) off, {left} temp file(s)"
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--projects", default=DEFAULT_PROJECTS, help=f"comma-separated (default {DEFAULT_PROJECTS})")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--edits", type=int, default=5, help="files the editor changes during each run")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "faults.md")
    args = ap.parse_args(argv)

    # Started as a background job of a non-interactive shell, this process and so its
    # children would ignore SIGINT (as POSIX shells intend, and npu-migrate respects):
    # the runs must get Ctrl-C as a terminal's foreground job does.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    rng = random.Random(args.seed)
    projects = ensure_corpus(parse_projects(args.projects), strict=True)
    work = Path(tempfile.mkdtemp(prefix="npu-migrate-faults-"))
    try:
        pristine = work / "pristine"
        for project in projects:
            shutil.copytree(project.root, pristine / project.root.name,
                            ignore=shutil.ignore_patterns(".corpus.json"))
        original = _files(pristine)
        expected, reference_s = _reference(pristine, work / "scratch", args.jobs)
        changed = sum(expected[n] != original[n] for n in original)
        print(f"{len(original)} files, {changed} changed by a clean run in {reference_s:.1f} s", flush=True)
        runs = []
        for number in range(1, args.runs + 1):
            kind = (number - 1) % 4
            scale = 0.6
            while True:
                run = Run(number, "SIGINT" if kind < 2 else "SIGKILL", "migrating" if kind % 2 == 0 else "writing")
                if _one(run, pristine, work / "scratch", original, expected, reference_s, args.jobs, args.edits, rng,
                        scale):
                    break
                scale /= 2  # the run was quicker than the reference: signal it sooner
            runs.append(run)
            print(_row(run), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = _report(runs, projects, len(original), changed, reference_s, args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {args.output}")
    bad = sum(bool(r.partial or r.lost_edits or r.hang or r.orphans or not r.recovered) for r in runs)
    bad += sum(r.exit_code != 130 or r.reported != r.written or r.written_late > 0 for r in runs if r.signal == "SIGINT")
    return 1 if bad else 0


def _row(run: Run) -> str:
    latency = f"{run.latency_s:.2f}" if run.latency_s is not None else "hang"
    reported = "" if run.reported is None else str(run.reported)
    return (f"run {run.number:2}: {run.signal} while {run.phase}: exit {run.exit_code}, {latency} s, "
            f"written {run.written} (reported {reported or '-'}, late {run.written_late}), "
            f"partial {len(run.partial)}, lost edits {len(run.lost_edits)}/{run.edits}, orphans {run.orphans}, "
            f"temp files {run.leftovers}, next run {'ok' if run.recovered else run.recovery_note}")


def _report(runs: list[Run], projects, files: int, changed: int, reference_s: float, args) -> str:
    header = ["run", "signal", "during", "exit", "signal to exit s", "written", "reported", "after signal",
              "partial", "lost edits", "hang/orphans", "temp files left", "next run"]
    rows = [[r.number, r.signal, r.phase, r.exit_code, f"{r.latency_s:.2f}" if r.latency_s is not None else "hang",
             r.written, "" if r.reported is None else r.reported, r.written_late, len(r.partial),
             f"{len(r.lost_edits)}/{r.edits}", f"{int(r.hang)}/{r.orphans}", r.leftovers,
             "ok" if r.recovered else r.recovery_note] for r in runs]
    ints = [r for r in runs if r.signal == "SIGINT"]
    latencies = sorted(r.latency_s for r in ints if r.latency_s is not None)
    exact = sum(r.reported == r.written for r in ints)
    lines = [
        "# Signals during --write (bench/faults.py)",
        "",
        (f"Corpus: {', '.join(p.label for p in projects)} ({files:,} files; a clean `--write` changes {changed:,} "
        f"in {reference_s:.1f} s). `--jobs {args.jobs}`, {args.edits} files edited during each run, seed {args.seed}."),
        (f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}."),
        "",
        markdown_table(header, rows),
        "",
        f"- runs: {len(runs)} ({len(ints)} Ctrl-C to the process group, {len(runs) - len(ints)} SIGKILL to the parent)",
        f"- partial or mixed files: {sum(len(r.partial) for r in runs)}",
        f"- lost edits: {sum(len(r.lost_edits) for r in runs)} of {sum(r.edits for r in runs)} edits made during runs",
        f"- hangs: {sum(r.hang for r in runs)}; workers outliving their parent: {sum(r.orphans for r in runs)}",
        f"- Ctrl-C: exit 130 in {sum(r.exit_code == 130 for r in ints)} of {len(ints)}; signal to exit "
        + (f"median {latencies[len(latencies) // 2]:.2f} s, max {latencies[-1]:.2f} s" if latencies else "n/a")
        + f"; the written count exact in {exact} of {len(ints)}; "
        f"files written after the signal: {sum(r.written_late for r in ints)}",
        (f"- temp files left by SIGKILL: {sum(r.leftovers for r in runs if r.signal == 'SIGKILL')}; "
        f"next run removed them and finished the migration in {sum(r.recovered for r in runs)} of {len(runs)} runs"),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
