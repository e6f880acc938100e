"""Speed where the work is: the CUDA-dense corpus, and "no file slower than linear".

Two measurements, both against the libcst floor (``libcst.parse_module(data).bytes``)
taken side by side in the same invocation, so that the ratios hold on a loaded
machine where the absolute seconds do not:

``corpus``
    The files of real training packages (downloaded at run time through
    ``bench/corpus.py``, nothing committed) whose CUDA density is at least
    ``--min-density`` CUDA uses per 1,000 lines (a use: the word ``cuda``,
    ``nccl``, ``CUDA_VISIBLE_DEVICES`` or an ``NCCL_*`` variable, outside nothing:
    a plain token count). They are copied into ``<cache>/dense/<project>/`` and
    measured with :func:`bench.throughput.run` (floor, ``--jobs 1``, ``--jobs 2``,
    warm re-run), ``--rounds`` times in a row, so that the floor is re-measured
    next to every round.

``linear``
    One CUDA-dense file grown 1x, 2x, 4x, 8x (the file repeated: its lines and its
    CUDA uses grow together), migrated in this process (``migrate_safely``) and
    parsed for the floor, alternating size by size. Time per line must stay flat;
    the ratio to the floor at each size is the figure that the load does not skew.

    python -m bench.dense corpus [--projects accelerate,peft,timm] [--rounds 2]
    python -m bench.dense linear [--file accelerate/state.py] [--sizes 1,2,4,8]
    python -m bench.dense isolation [--repeat 3]   (after ``corpus``: uses its tree)
    python -m bench.dense floor [--repeat 3]       (after ``corpus``: uses its tree)

``floor``
    The floor argument, measured per file of the dense tree in this process (CPU
    seconds, median of ``--repeat`` alternating runs): libcst's parse alone, parse +
    codegen (the floor), parse + ``MetadataWrapper`` (libcst's default, a deep copy)
    and + positions resolved, CPython's ``ast.parse``, libcst's parse of the file as
    the engine parses it (definitions no needed rule acts on left out:
    ``npu_migrate/python/elision.py``), and the engine (``migrate_safely``). Every
    figure is a ratio to the floor of the same files; the engine's own lower bound
    is its ``ast.parse`` plus its libcst parse of the reduced file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS_DIR, markdown_table
from bench.corpus import Project, default_cache_dir, ensure_corpus, parse_projects, python_files

#: The projects the dense set is drawn from (pinned in bench/corpus.py).
DENSE_PROJECTS = "accelerate,peft,timm,diffusers"
#: What counts as one CUDA use.
CUDA_USE = re.compile(rb"\bcuda\b|\bnccl\b|\bCUDA_VISIBLE_DEVICES\b|\bNCCL_[A-Z_]+\b")
#: The default file grown by ``linear``: accelerate's state.py (1,373 lines, 18 CUDA uses).
DEFAULT_GROWN = ("accelerate", "accelerate/state.py")


def cuda_uses(data: bytes) -> int:
    return len(CUDA_USE.findall(data))


def dense_tree(projects: list[Project], min_density: float, cache_dir: Path) -> tuple[list[Project], dict]:
    """Copy every file with at least ``min_density`` CUDA uses per kLOC into
    ``cache_dir/dense/<project>/`` (a fresh copy); one Project per source project."""
    out_root = cache_dir / "dense"
    shutil.rmtree(out_root, ignore_errors=True)
    dense: list[Project] = []
    stats = {"files": 0, "lines": 0, "uses": 0, "per_project": []}
    for p in projects:
        files = lines = uses = 0
        target = out_root / p.root.name
        for rel in python_files(p.root):
            data = (p.root / rel).read_bytes()
            n_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
            n_uses = cuda_uses(data)
            if not n_lines or n_uses * 1000 / n_lines < min_density:
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_bytes(data)
            files, lines, uses = files + 1, lines + n_lines, uses + n_uses
        if files:
            dense.append(Project(p.name, p.version, target, p.artifact, p.artifact_bytes, files, lines))
            stats["per_project"].append((p.label, files, lines, uses))
            stats["files"] += files
            stats["lines"] += lines
            stats["uses"] += uses
    return dense, stats


def corpus_main(args) -> int:
    from bench import throughput

    cache = args.cache_dir or default_cache_dir()
    projects = ensure_corpus(parse_projects(args.projects), cache)
    dense, stats = dense_tree(projects, args.min_density, cache)
    if not dense:
        print("no dense file found", file=sys.stderr)
        return 2
    out = ["# CUDA-dense corpus: npu-migrate against the libcst floor", "",
           f"Files with >= {args.min_density:g} CUDA uses per kLOC (`bench/dense.py`, CUDA_USE).", ""]
    table = [[label, f"{f:,}", f"{l:,}", f"{u:,}", f"{u * 1000 / l:.1f}"] for label, f, l, u in stats["per_project"]]
    table.append(["**total**", f"{stats['files']:,}", f"{stats['lines']:,}", f"{stats['uses']:,}",
                  f"{stats['uses'] * 1000 / stats['lines']:.1f}"])
    out += [markdown_table(["project", "files", "lines", "CUDA uses", "uses/kLOC"], table), ""]
    print("\n".join(out), file=sys.stderr)
    skip = {"single", "ruff"} | {s for s in args.skip.split(",") if s}
    tools = [("this checkout", os.environ.get("NPU_MIGRATE_CMD"))]
    if args.baseline_cmd:
        tools.append((f"baseline `{args.baseline_cmd}`", args.baseline_cmd))
    for round_no in range(1, args.rounds + 1):
        for label, cmd in tools:  # alternating, each next to a floor of its own
            if cmd is None:
                os.environ.pop("NPU_MIGRATE_CMD", None)
            else:
                os.environ["NPU_MIGRATE_CMD"] = cmd
            rows, meta = throughput.run(dense, 1, skip=skip, log=lambda m: print(m, file=sys.stderr))
            text = throughput.render(rows, meta, dense, 1).splitlines()
            out += [f"## Round {round_no} of {args.rounds}: {label}", "", *text[2:], ""]
            print("\n".join(out[-len(text):]), flush=True)
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text("\n".join(out) + "\n", encoding="utf-8")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"written to {args.output}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- linear

def grown(data: bytes, times: int) -> bytes:
    """``data`` repeated ``times`` times (a valid module: the same definitions again)."""
    if not data.endswith(b"\n"):
        data += b"\n"
    return data * times


def _floor_once(data: bytes) -> float:
    import libcst

    start = time.process_time()
    _ = libcst.parse_module(data).bytes
    return time.process_time() - start


def _tool_once(path: str, data: bytes) -> float:
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.pipeline.settings import Settings

    start = time.process_time()
    result = migrate_safely(path, data, Settings())
    elapsed = time.process_time() - start
    if result.error:
        raise SystemExit(f"{path}: {result.error}")
    return elapsed


def linear_main(args) -> int:
    cache = args.cache_dir or default_cache_dir()
    name, rel = args.file.split(":", 1) if ":" in args.file else (DEFAULT_GROWN[0], args.file)
    project = ensure_corpus(parse_projects(name), cache)[0]
    data = (project.root / rel).read_bytes()
    sizes = [int(s) for s in args.sizes.split(",")]
    _tool_once(rel, data)  # imports and rule registry, outside the timings
    rows = []
    for times in sizes:
        big = grown(data, times)
        floor, tool = [], []
        for _ in range(args.repeat):  # alternating, so both see the same load
            floor.append(_floor_once(big))
            tool.append(_tool_once(rel, big))
        lines = big.count(b"\n")
        f, t = statistics.median(floor), statistics.median(tool)
        rows.append([f"{times}x", f"{lines:,}", f"{cuda_uses(big):,}", f"{f:.2f}", f"{t:.2f}",
                     f"{f / lines * 1e6:.0f}", f"{t / lines * 1e6:.0f}", f"{t / f:.2f}x",
                     f"{os.getloadavg()[0]:.1f}"])
        print(rows[-1], file=sys.stderr)
    text = ["# No file slower than linear", "",
            f"`{project.label}/{rel}` repeated; median of {args.repeat} alternating runs per size, in one process; "
            "CPU seconds of this process (`time.process_time`), which other load on the machine disturbs "
            "less than wall time.",
            "",
            markdown_table(["size", "lines", "CUDA uses", "floor CPU s", "npu-migrate CPU s", "floor µs/line",
                            "npu-migrate µs/line", "vs floor", "load"], rows), ""]
    print("\n".join(text))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(text), encoding="utf-8")
    return 0


# --------------------------------------------------------------------------- isolation

def isolation_main(args) -> int:
    """What the crash isolation costs: ``runner.run`` with its worker pool (``--jobs 1``:
    one worker process that handles every file) against the same call with the pool
    refused, so that every file is migrated in this process (the fallback the runner
    has for platforms without process pools), alternating, ``--repeat`` times."""
    from unittest import mock

    from npu_migrate.pipeline import runner
    from npu_migrate.pipeline.settings import Settings

    cache = args.cache_dir or default_cache_dir()
    root = cache / "dense"
    paths = sorted(str(p) for p in root.rglob("*.py"))
    if not paths:
        raise SystemExit(f"no dense tree under {root}: run `python -m bench.dense corpus` first")

    def no_pool(*_a, **_k):
        raise runner._NoProcessPool()

    runner.run(paths[:1], Settings(), jobs=1)  # imports outside the timings
    pooled, inline = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        runner.run(paths, Settings(), jobs=1)
        pooled.append(time.perf_counter() - start)
        with mock.patch.object(runner, "_until_broken", no_pool):
            start = time.perf_counter()
            runner.run(paths, Settings(), jobs=1)
            inline.append(time.perf_counter() - start)
        print(f"pool {pooled[-1]:.2f} s, in-process {inline[-1]:.2f} s, load {os.getloadavg()[0]:.1f}",
              file=sys.stderr)
    p, i = statistics.median(pooled), statistics.median(inline)
    print(f"{len(paths)} files: worker pool (--jobs 1) {p:.2f} s, in-process {i:.2f} s: "
          f"isolation costs {p - i:+.2f} s ({(p - i) / i:+.1%}); load {os.getloadavg()[0]:.1f}")
    return 0


# --------------------------------------------------------------------------- floor

def _cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def engine_parse_input(path: str, data: bytes) -> tuple[bytes | None, list[str]]:
    """What the engine hands libcst for this file (the reduced file where elision
    applies; None where no rule is needed and libcst never runs) and the rules needed,
    as ``npu_migrate.python.engine._migrate`` computes them."""
    from npu_migrate.pipeline.registry import rules_for
    from npu_migrate.pipeline.settings import Settings
    from npu_migrate.python import engine, lossless
    from npu_migrate.python.source import decode

    settings = Settings()
    text = decode(path, data)
    tree = engine.python_ast(path, data)
    rules = rules_for("python")
    active = tuple(rid for rid in rules if settings.selection.active(rid, path, rules[rid].opt_in))
    needed = engine._prefilter(active).rules_needed(text)
    if not needed:
        return None, needed
    reduced = engine._reduce(data, text, needed, tree) if tree is not None else None
    return lossless.protect(reduced.data if reduced is not None else data).data, needed


def floor_main(args) -> int:
    """See the module's docstring (``floor``)."""
    import ast

    import libcst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.pipeline.settings import Settings

    cache = args.cache_dir or default_cache_dir()
    root = cache / "dense"
    paths = sorted(root.rglob("*.py"))
    if not paths:
        raise SystemExit(f"no dense tree under {root}: run `python -m bench.dense corpus` first")
    settings = Settings()
    migrate_safely(str(paths[0]), paths[0].read_bytes(), settings)  # imports outside the timings
    columns = ["parse", "floor", "wrapper", "positions", "ast", "engine parse", "engine"]
    totals = dict.fromkeys(columns, 0.0)
    lines = reduced_bytes = all_bytes = 0
    skipped = below = 0
    for path in paths:
        data = path.read_bytes()
        rel = str(path.relative_to(root))
        engine_input, _ = engine_parse_input(rel, data)
        steps = {
            "parse": lambda: libcst.parse_module(data),
            "floor": lambda: libcst.parse_module(data).bytes,
            "wrapper": lambda: MetadataWrapper(libcst.parse_module(data)),
            "positions": lambda: MetadataWrapper(libcst.parse_module(data), unsafe_skip_copy=True)
            .resolve(PositionProvider),
            "ast": lambda: ast.parse(data),
            "engine parse": (lambda: libcst.parse_module(engine_input)) if engine_input is not None else (lambda: None),
            "engine": lambda: migrate_safely(rel, data, settings),
        }
        times = {name: [] for name in columns}
        for _ in range(args.repeat):  # alternating, so that all see the same load
            for name in columns:
                times[name].append(_cpu(steps[name]))
        medians = {name: statistics.median(t) for name, t in times.items()}
        for name in columns:
            totals[name] += medians[name]
        lines += data.count(b"\n")
        all_bytes += len(data)
        reduced_bytes += len(engine_input) if engine_input is not None else 0
        skipped += engine_input is None
        below += medians["engine"] < medians["floor"]
        print(f"{rel}: floor {medians['floor']:.3f} s, engine {medians['engine']:.3f} s "
              f"({medians['engine'] / medians['floor']:.2f}x), load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    floor = totals["floor"]
    labels = {
        "parse": "libcst parse alone (`parse_module`)",
        "floor": "libcst parse + codegen (the floor)",
        "wrapper": "parse + `MetadataWrapper` (libcst's default: deep copy)",
        "positions": "parse + `MetadataWrapper(unsafe_skip_copy)` + positions resolved",
        "ast": "CPython `ast.parse` (the engine's first step)",
        "engine parse": "libcst parse of what the engine parses (reduced file)",
        "engine": "the engine (`migrate_safely`, every rule)",
    }
    rows = [[labels[name], f"{totals[name]:.2f}", f"{totals[name] / floor:.2f}x"] for name in columns]
    lower = totals["ast"] + totals["engine parse"]
    text = ["# The floor argument, per file of the dense tree", "",
            f"{len(paths)} files, {lines:,} lines; CPU seconds of this process (`time.process_time`), per file the "
            f"median of {args.repeat} alternating runs, summed; load at the end {os.getloadavg()[0]:.1f}.", "",
            markdown_table(["step", "CPU s", "vs floor"], rows), "",
            f"- the engine hands libcst {reduced_bytes / all_bytes:.0%} of the bytes "
            f"({skipped} file(s) not at all: no rule needed);",
            f"- the engine's parse alone (ast.parse + libcst parse of the reduced file) is "
            f"{lower / floor:.2f}x the floor: no engine that parses this much with libcst can go below that;",
            f"- files where the engine took less than the floor: {below} of {len(paths)}.", ""]
    print("\n".join(text))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(text), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--projects", default=DENSE_PROJECTS)
    c.add_argument("--min-density", type=float, default=4.0, help="CUDA uses per kLOC (default 4)")
    c.add_argument("--rounds", type=int, default=2)
    c.add_argument("--baseline-cmd", default=None,
                   help="also measure this npu-migrate command line (another checkout) in every round")
    c.add_argument("--skip", default="", help="rows to leave out: floor,jobs1,jobs2,warm")
    c.add_argument("--output", type=Path, default=RESULTS_DIR / "dense.md")
    lin = sub.add_parser("linear")
    lin.add_argument("--file", default=DEFAULT_GROWN[1], help="[project:]path inside the project")
    lin.add_argument("--sizes", default="1,2,4,8")
    lin.add_argument("--repeat", type=int, default=1)
    lin.add_argument("--output", type=Path, default=RESULTS_DIR / "linear.md")
    iso = sub.add_parser("isolation")
    iso.add_argument("--repeat", type=int, default=3)
    fl = sub.add_parser("floor")
    fl.add_argument("--repeat", type=int, default=3)
    fl.add_argument("--output", type=Path, default=RESULTS_DIR / "floor.md")
    for p in (c, lin, iso, fl):
        p.add_argument("--cache-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    return {"corpus": corpus_main, "linear": linear_main, "isolation": isolation_main,
            "floor": floor_main}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
