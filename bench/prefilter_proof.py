"""Proof that the token prefilter and elision never hide or alter a change or a finding.

Runs npu-migrate twice over the corpus as a dry run with ``--report``: once as
shipped, once with ``--no-prefilter`` (every file parsed, and parsed whole: no
definitions elided, see ``npu_migrate/python/elision.py``). The per-file reports and
the per-file diffs must be identical; a file that the full run changes or
reports on but the prefiltered run passes over is a prefilter miss. Exit 1 on
any difference.

The proof runs on the corpus as published and on a migrated copy of it
(``npu-migrate --write`` on a scratch copy first): migrated code no longer says
"cuda" where the original did, so the words rules are found by change, and the
report of a run over migrated code must not depend on the prefilter either.

    python -m bench.prefilter_proof [--projects accelerate] [--sample N] [--jobs N] [--trees original,migrated]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import load_report, npu_migrate_cmd, position
from bench.corpus import (
    Project,
    default_cache_dir,
    ensure_corpus,
    parse_projects,
    python_files,
)


@dataclass
class Proof:
    files: int = 0
    seconds_prefilter: float = 0.0
    seconds_full: float = 0.0
    exit_prefilter: int | None = None
    exit_full: int | None = None
    busy_full: int = 0          # files with a change, a fix, a finding or an error in the full run
    missed: list[str] = field(default_factory=list)   # busy in the full run, quiet in the prefiltered one
    differ: list[str] = field(default_factory=list)   # both busy, but not the same entries
    extra: list[str] = field(default_factory=list)    # busy only in the prefiltered run (should not happen)
    details: dict[str, list[str]] = field(default_factory=dict)  # path -> what differs

    def ok(self) -> bool:
        return not (self.missed or self.differ or self.extra) and self.exit_prefilter == self.exit_full


def split_diffs(output: str) -> dict[str, str]:
    """The dry run's unified diffs, by path (``--- a/<path>`` starts one)."""
    diffs: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines(keepends=True):
        if line.startswith("--- a/"):
            current = diffs.setdefault(line[len("--- a/"):].rstrip("\r\n"), [])
        if current is not None:
            current.append(line)
    return {path: "".join(lines) for path, lines in diffs.items()}


def _key(entry: dict | None) -> tuple:
    """What must agree between the two runs for one file."""
    if not entry:
        return (False, None, (), ())
    fixes = tuple(sorted((f.get("rule"), *position(f), f.get("message")) for f in entry.get("fixes") or []))
    finds = tuple(sorted((f.get("rule"), *position(f), f.get("message"), f.get("suggestion"))
                         for f in entry.get("findings") or []))
    return (bool(entry.get("changed")), entry.get("error") or None, fixes, finds)


_QUIET = (False, None, (), ())


def _explain(prefiltered: tuple, full: tuple) -> list[str]:
    out = []
    if prefiltered[0] != full[0]:
        out.append(f"changed: prefiltered {prefiltered[0]}, full {full[0]}")
    if prefiltered[1] != full[1]:
        out.append(f"error: prefiltered {prefiltered[1]!r}, full {full[1]!r}")
    for kind, a, b in (("fix", prefiltered[2], full[2]), ("finding", prefiltered[3], full[3])):
        out += [f"{kind} only in the full run: {item}" for item in sorted(set(b) - set(a), key=repr)]
        out += [f"{kind} only in the prefiltered run: {item}" for item in sorted(set(a) - set(b), key=repr)]
    return out


def compare(prefiltered: dict[str, dict], full: dict[str, dict], proof: Proof,
            diffs: tuple[dict[str, str], dict[str, str]] = ({}, {})) -> Proof:
    for path in sorted(set(prefiltered) | set(full)):
        a, b = _key(prefiltered.get(path)), _key(full.get(path))
        if b != _QUIET:
            proof.busy_full += 1
        same_diff = diffs[0].get(path) == diffs[1].get(path)
        if a == b and same_diff:
            continue
        proof.details[path] = _explain(a, b) + ([] if same_diff else ["the diffs differ"])
        if a == _QUIET:
            proof.missed.append(path)
        elif b == _QUIET:
            proof.extra.append(path)
        else:
            proof.differ.append(path)
    return proof


def _migrated_copy(projects: list[Project], files: list[str], work: Path, jobs: int, log) -> Path:
    """A scratch copy of ``files`` after ``npu-migrate --write`` (the cache is not written)."""
    tree = work / "migrated"
    for rel in files:
        name, _, inner = rel.partition("/")
        root = next(p.root for p in projects if p.root.name == name)
        dest = tree / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / inner, dest)
    log(f"npu-migrate --write on a scratch copy of {len(files):,} files ...")
    cmd = npu_migrate_cmd() + sorted({f.split("/", 1)[0] for f in files}) + ["--write", "-q", "--no-cache", "--no-diff"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    subprocess.run(cmd, cwd=tree, capture_output=True, text=True, errors="replace")
    return tree


def prove(projects: list[Project], sample: int = 1, jobs: int = 0, log=print, migrated: bool = False) -> Proof:
    src = projects[0].root.parent
    files = [f"{p.root.name}/{rel.as_posix()}" for p in projects for rel in python_files(p.root, sample)]
    targets = [p.root.name for p in projects] if sample == 1 else files
    proof = Proof(files=len(files))
    work = Path(tempfile.mkdtemp(prefix="npu-migrate-prefilter-"))
    try:
        if migrated:
            src = _migrated_copy(projects, files, work, jobs, log)
        reports = {}
        diffs = {}
        for label, extra in (("prefilter", []), ("full", ["--no-prefilter"])):
            report = work / f"{label}.json"
            log(f"npu-migrate dry run ({label}) on {len(files):,} files ...")
            cmd = npu_migrate_cmd() + targets + ["-q", "--no-cache", "--report", str(report)] + extra
            if jobs:
                cmd += ["--jobs", str(jobs)]
            start = time.perf_counter()
            proc = subprocess.run(cmd, cwd=src, capture_output=True, text=True, errors="replace")
            seconds = time.perf_counter() - start
            if not report.is_file():
                raise RuntimeError(f"{label} run wrote no report (exit {proc.returncode}): {proc.stderr[-2000:]}")
            reports[label] = {p: e for p, e in load_report(report)["by_path"].items()}
            diffs[label] = split_diffs(proc.stdout)
            setattr(proof, f"seconds_{label}", seconds)
            setattr(proof, f"exit_{label}", proc.returncode)
        compare(reports["prefilter"], reports["full"], proof, (diffs["prefilter"], diffs["full"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return proof


def render(proof: Proof) -> str:
    out = [
        f"files: {proof.files:,}; files with a change, fix, finding or error (full run): {proof.busy_full:,}",
        f"prefiltered run: {proof.seconds_prefilter:.1f} s (exit {proof.exit_prefilter}); "
        f"full run (--no-prefilter): {proof.seconds_full:.1f} s (exit {proof.exit_full})",
        f"missed by the prefilter: {len(proof.missed)}; reports differ: {len(proof.differ)}; "
        f"only in the prefiltered run: {len(proof.extra)}",
    ]
    for title, items in (("MISSED", proof.missed), ("DIFFER", proof.differ), ("EXTRA", proof.extra)):
        for path in items:
            out.append(f"{title}: {path}")
            out += [f"    {line}" for line in proof.details.get(path, [])[:20]]
    out.append("identical reports and diffs: " + ("yes" if proof.ok() else "NO"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the prefilter must not change any report")
    ap.add_argument("--projects", help="comma-separated subset, e.g. accelerate,timm")
    ap.add_argument("--sample", type=int, default=1, help="take every Nth file (default 1: all)")
    ap.add_argument("--jobs", type=int, default=0, help="--jobs for npu-migrate (default: its own)")
    ap.add_argument("--cache-dir", type=Path, default=None, help=f"corpus cache (default {default_cache_dir()})")
    ap.add_argument("--trees", default="original,migrated",
                    help="which trees to prove it on: original, migrated (default both)")
    args = ap.parse_args(argv)
    trees = [t.strip() for t in args.trees.split(",") if t.strip()]
    if not trees or any(t not in ("original", "migrated") for t in trees):
        print(f"--trees: expected original and/or migrated, got {args.trees!r}", file=sys.stderr)
        return 2
    projects = ensure_corpus(parse_projects(args.projects), args.cache_dir)
    if not projects:
        print("no project could be downloaded", file=sys.stderr)
        return 2
    ok = True
    for tree in trees:
        proof = prove(projects, args.sample, args.jobs, log=lambda m: print(m, file=sys.stderr),
                      migrated=tree == "migrated")
        print(f"## {tree} tree\n{render(proof)}\n")
        ok = ok and proof.ok()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
