"""``npu-migrate verify SCRIPT -- ARGS``: what the command does, step by step.

1. copy the project (the current directory) twice into a scratch directory;
   (symbolic links are confined to the copy, special files left out:
   npu_migrate/verify/scratch.py);
2. migrate one copy normally (the migrated twin); the other stays the original (the
   reference twin, run on the same emulated NPU with CUDA served by it:
   npu_migrate/verify/cuda_on_npu.py);
3. run both for N optimizer steps through the hook (npu_migrate/verify/hook.py);
4. compare them step by step (npu_migrate/verify/compare.py);
5. resume round-trip: restart both twins after the last checkpoint written before
   step N (in their own copies where nothing was saved after it, else in the snapshot
   each uninterrupted run took there, else in fresh copies stopped there first), and
   compare the restarted migrated twin with the restarted reference (and each with its
   uninterrupted run); where the twins agree bit for bit, the migrated twin restarts
   first, and the reference's restart is left out when the migrated resume is exact
   (it then computes what the original computes without a stop);
6. verdict, report (npu_migrate/verify/report.py), exit 0 pass / 1 fail / 2 error.

Nothing is written into the user's tree: the migration, the runs, their
checkpoints and caches all live in the scratch copies.
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import compare, hook, removal, report, scratch, twins

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


class VerifyError(Exception):
    """Verify could not reach a verdict (exit 2); ``str()`` is one line."""


@dataclass
class Request:
    script: str
    args: list[str] = field(default_factory=list)
    nproc: int = 1
    steps: int = 4
    report: str | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] | None = None
    extend_ignore: list[str] = field(default_factory=list)
    config: str | None = None
    project: str = "."
    resume: bool = True
    resume_args: list[str] = field(default_factory=list)
    seed: int = 0
    timeout: float = 600.0
    keep: bool = False
    quiet: bool = False
    #: start one process with torchrun too (scripts that always call init_process_group)
    torchrun: bool = False
    #: the script starts its own processes (torch.multiprocessing.spawn); None: detect it
    spawns: bool | None = None
    #: run the two twins at the same time (2), or one after the other (1: a script that
    #: binds a fixed port, MASTER_PORT=12355, would collide with its twin)
    jobs: int | None = 1
    #: the reference twin: "original" (the unmigrated source on the emulated NPU, CUDA
    #: served by it) or "cpu-retarget" (the source migrated to the CPU target, on the CPU)
    reference: str = "original"
    #: fork one-process runs from a server per twin (npu_migrate/verify/zygote.py); None:
    #: on unless NPU_MIGRATE_FORK_SERVER=0 (--fork-server/--no-fork-server decide otherwise)
    fork_server: bool | None = None


def fork_server_wanted(req: Request) -> bool:
    """Whether one-process runs are forked from a server per twin: ``--fork-server`` /
    ``--no-fork-server`` where given, else on unless ``NPU_MIGRATE_FORK_SERVER`` is 0
    (or false, no, off: the runtime's switches read the same)."""
    if req.fork_server is not None:
        return req.fork_server
    return os.environ.get("NPU_MIGRATE_FORK_SERVER", "1").strip().lower() not in {"0", "false", "no", "off"}


def _say(req: Request, message: str) -> None:
    if not req.quiet:
        from npu_migrate.reporting.printable import printable

        print(f"verify: {printable(message)}", file=sys.stderr, flush=True)  # names from the project: escaped


def _versions() -> dict:
    from importlib import metadata

    from npu_migrate import __version__

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {"npu-migrate": __version__, "torch": version("torch"), "python": platform.python_version()}


def _terminated(signum, frame):
    raise SystemExit(128 + signum)  # unwinds: the runs are ended, the scratch directory removed


#: Signals that end verify as Ctrl-C does (SIGHUP: the terminal was closed).
_ENDING = (signal.SIGTERM, signal.SIGHUP)


def run(req: Request) -> int:
    try:
        previous = {signum: signal.signal(signum, _terminated) for signum in _ENDING}
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        return _run(req)
    except VerifyError as exc:
        from npu_migrate.reporting.printable import printable

        print(f"npu-migrate verify: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("npu-migrate verify: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _resolve(req: Request) -> tuple[Path, str]:
    root = Path(req.project).resolve()
    if not root.is_dir():
        raise VerifyError(f"{req.project}: not a directory")
    script = Path(req.script)
    script_abs = (script if script.is_absolute() else Path.cwd() / script).resolve()
    if not script_abs.is_file():
        raise VerifyError(f"{req.script}: no such script")
    if not script_abs.is_relative_to(root):
        raise VerifyError(f"{req.script} is outside the project directory {root} (see --project)")
    if req.nproc < 1 or req.steps < 1:
        raise VerifyError("--nproc and --steps must be at least 1")
    return root, str(script_abs.relative_to(root))


def _run(req: Request) -> int:
    root, script = _resolve(req)
    if req.report:
        problem = report.unwritable(Path(req.report))
        if problem:  # before the runs: their minutes are not spent on a report that cannot be written
            raise VerifyError(f"--report {problem}")
        report_path = Path(req.report).resolve()
        if report_path.is_relative_to(root):
            _say(req, f"note: the report is written inside the project ({req.report}), as asked")
    cwd_in_root = Path.cwd().resolve().relative_to(root) if Path.cwd().resolve().is_relative_to(root) else Path(".")
    work = removal.make_scratch(keep=req.keep)
    try:
        return _verify(req, root, script, cwd_in_root, work)
    except scratch.ScratchError as exc:
        raise VerifyError(str(exc)) from None
    finally:
        # A second signal must not cut the removal short: held until it is done.
        held = _hold_signals()
        try:
            if req.keep:
                _say(req, f"scratch copies kept in {work}")
            elif not removal.remove_tree(work):  # said even with --quiet: something is left behind
                _say(replace(req, quiet=False), f"warning: could not remove the scratch directory {work}")
        finally:
            _release_signals(held)


def _hold_signals():
    try:
        return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *_ENDING})
    except (AttributeError, ValueError, OSError):
        return None


def _release_signals(held) -> None:
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _ref_env(req: Request, env: dict, emulated: bool) -> dict:
    """The reference twin's environment: the original on the emulated NPU (default),
    or the CPU-retargeted copy on the CPU (``--reference cpu-retarget``)."""
    if req.reference == "cpu-retarget":
        return twins.cpu_env(env, req.nproc)
    return twins.reference_env(env, req.nproc, emulated)


def _verify(req: Request, root: Path, script: str, cwd_in_root: Path, work: Path) -> int:
    from .detect import binds_fixed_port, data_parallel_only, spawns_processes

    if req.jobs is None:  # the twins at the same time: each run has a rendezvous port of its own
        req.jobs = 2
        if binds_fixed_port(root / script):
            _say(req, f"{script} sets a fixed rendezvous port: each run gets a free one instead (at "
                      "init_process_group)")
    spawns = req.spawns
    if spawns is None:
        spawns = req.nproc > 1 and not req.torchrun and spawns_processes(root / script)
    retarget = req.reference == "cpu-retarget"
    if req.nproc > 1 and not spawns and data_parallel_only(root / script):
        raise VerifyError(f"{script} uses nn.DataParallel without a distributed path of its own: verify it with "
                          "--nproc 1 (with more, the migrated twin is a DDP job that shards each batch while the "
                          "reference keeps DataParallel's whole batch per process; see docs/verify.md)")
    skip = work if work.is_relative_to(root) else None
    notes: list[str] = []
    ref_copy = scratch.copy_project(root, work / "reference", skip, notes)
    for note in notes:
        _say(req, f"note: {note}")
    npu_copy = scratch.copy_project(root, work / "npu", skip)
    empty_config = work / "reference.toml"
    empty_config.write_text("[tool.npu-migrate]\n", "utf-8")
    _say(req, f"copying {root} twice into {work}; migrating one copy (while the reference twin starts)"
              if req.jobs >= 2 else f"copying {root} twice into {work}; migrating one copy")
    options = {
        "npu": twins.migrated_options(req.select, req.extend_select, req.ignore, req.extend_ignore,
                                      str(Path(req.config).resolve()) if req.config else None),
        # the reference is the original source with the migration's device-neutral fixes
        # only (NEUTRAL_RULES); or, asked for, the CPU retarget
        "ref": twins.reference_options(empty_config) if retarget else twins.neutral_options(
            req.ignore, req.extend_ignore, str(Path(req.config).resolve()) if req.config else None),
    }
    try:
        twins.migrate_copy(ref_copy, options["ref"])
    except twins.MigrationError as exc:
        raise VerifyError(str(exc)) from None
    fixed = [] if retarget else twins.changed_files(root, ref_copy)

    def migrate_npu_copy() -> str:
        """The migrated twin's migration: while the reference twin starts, with --jobs 2."""
        try:
            return twins.migrate_copy(npu_copy, options["npu"])
        except twins.MigrationError as exc:
            raise VerifyError(str(exc)) from None

    def fresh_copy(name: str) -> Path:
        """Another copy of the project, migrated as twin ``name`` was (for a stop-and-restart)."""
        copy = scratch.copy_project(root, work / f"resume-{name}", skip)
        twins.migrate_copy(copy, options[name])
        return copy

    # Where torch_npu imports from the script's directory: the copies hold the same files
    # (the migration adds no module), so the reference's copy answers for both.
    real = twins.real_npu(ref_copy, script)
    emulated = real is None
    device = "the emulated NPU" if emulated else f"a real NPU (torch_npu from {real})"
    if emulated:
        from npu_migrate.emulate.build import BuildError, build

        try:
            build()
        except BuildError as exc:
            raise VerifyError(f"the emulated NPU cannot be built: {exc}") from None

    if spawns:
        _say(req, f"{script} starts its own processes (torch.multiprocessing.spawn): run as one process "
                  f"with {req.nproc} device(s)")

    records = work / "records"
    # One process: each uninterrupted run snapshots its copy after the steps it saved after,
    # so that the round-trip needs no stop run (hook.ENV_SNAPSHOT, twins.snapshot_after).
    snapshots = req.resume and req.nproc == 1 and not req.torchrun and not spawns
    keep = twins.with_snapshots if snapshots else (lambda env: env)
    # A fork server per twin for one-process runs (npu_migrate/verify/zygote.py; off with
    # --no-fork-server or NPU_MIGRATE_FORK_SERVER=0). Each run still falls back to a fresh
    # process where the server's checks (environment, threads, shadowed modules) say so.
    servers: dict[str, twins.Server] = {}
    forked: list[str] = []  # how each run started, for the report
    if (fork_server_wanted(req) and req.nproc == 1 and not req.torchrun and not spawns
            and emulated and not retarget):
        servers["ref"] = twins.Server(_ref_env(req, twins.base_env(records / "reference", req.steps, req.seed),
                                               emulated), work / "server-ref")
        servers["npu"] = twins.Server(twins.npu_env(twins.base_env(records / "npu", req.steps, req.seed),
                                                    req.nproc, emulated), work / "server-npu")
        for server in servers.values():
            server.forked = forked

    def run_twin(name, copy, env, steps, args, announce=True):
        if announce:
            _say(req, f"running the {name} ({steps} step(s))")
        env = dict(env, **{hook.ENV_ROOT: str(copy)})
        return twins.run(name, copy / cwd_in_root, str(copy / script), args, req.nproc, env, req.timeout,
                         req.torchrun, spawns, server=servers.get("ref" if name.startswith("reference") else "npu"))

    try:
        return _verify_runs(req, root, script, work, records, keep, run_twin, migrate_npu_copy, fresh_copy, ref_copy,
                            npu_copy, fixed, retarget, emulated, device, spawns, servers)
    finally:
        for server in servers.values():
            server.close()


def _verify_runs(req, root, script, work, records, keep, run_twin, migrate_npu_copy, fresh_copy, ref_copy, npu_copy,
                 fixed, retarget, emulated, device, spawns, servers) -> int:
    migration_log = ""

    def migrate_npu_copy_here() -> None:
        nonlocal migration_log
        migration_log = migrate_npu_copy()
    # announced here: the migration of the other copy captures the output while this run starts
    _say(req, f"running the reference twin ({req.steps} step(s))")
    ref, npu = _both(req, lambda: run_twin("reference twin", ref_copy, keep(_ref_env(req, twins.base_env(
        records / "reference", req.steps, req.seed), emulated)), req.steps, req.args, announce=False),
        lambda: run_twin("migrated twin", npu_copy, keep(twins.npu_env(twins.base_env(
            records / "npu", req.steps, req.seed), req.nproc, emulated)), req.steps, req.args),
        before_second=migrate_npu_copy_here)

    _original_frame(npu, root, npu_copy)
    _original_frame(ref, root, ref_copy)
    if retarget:
        reference = "the source retargeted to the CPU (--reference cpu-retarget)"
    else:
        reference = (f"the original source on {device}, CUDA served by it"
                     + (f" (the device-neutral fixes NPU401/402/501/502 changed {', '.join(fixed)})" if fixed
                        else ", unmodified"))
    base = {
        "tool": "npu-migrate verify", "versions": _versions(), "script": script, "args": req.args,
        "nproc": req.nproc, "launch": "spawn" if spawns else ("torchrun" if req.nproc > 1 or req.torchrun
                                                               else "python"),
        "steps_requested": req.steps, "seed": req.seed, "device": device, "reference": reference,
        "project": str(root), "reference_changed": fixed,
        "twins": {"reference": _twin_info(ref), "migrated": _twin_info(npu)},
        "migration": migration_log.strip().splitlines()[-20:],
    }
    if servers:
        base["fork_server"] = next(iter(servers.values())).forked  # filled in by the round-trip's runs too
    base["steps_counted_by"] = "backward" if any(step.get("manual") for r in (ref, npu) for data in r.ranks.values()
                                                 for step in data.get("steps", [])) else "optimizer"
    kernels = compare.attention_differences(ref, npu)
    tol = compare.precision(ref, npu, real_npu=not emulated, same_device=not retarget and emulated,
                            other_kernels=bool(kernels))
    base["precision"] = tol.as_dict()
    base["attention_kernels"] = kernels
    kept = _keep_logs(req, work, [r for r in (ref, npu) if r.error is not None])
    base["logs"] = kept
    if ref.error is not None:
        where = _frame_line(ref)
        same = npu.error is not None and _frame_of(ref) and _frame_of(ref) == _frame_of(npu)
        reason = (f"the reference twin (the original, unmigrated) failed{where}: {ref.error}; "
                  + ("the migrated twin fails there too: the original does not run with these arguments "
                     "(not a migration problem); " if same else "")
                  + f"log: {kept.get('reference twin', 'rerun with --keep to keep it')}")
        return _finish(req, dict(base, verdict="error", steps=[], metrics={}, resume={"status": "not-tried"},
                                 reason=reason, paths={"reference": compare.paths_of(ref),
                                                       "migrated": compare.paths_of(npu)}), EXIT_ERROR)

    if retarget:
        compare.rename_device(ref, "cpu", "npu")
    rows, first, metrics = compare.compare_runs(ref, npu, tol)
    path_diffs = compare.path_differences(ref, npu)
    hidden = compare.silent_cpu(npu, None if retarget else ref) if npu.ranks else []
    resume = {"status": "not-tried", "detail": ["--no-resume"]} if not req.resume else None
    if req.report:
        report.preload()  # while the round-trip runs
    if resume is None:
        resume = _resume(req, ref, npu, {"ref": ref_copy, "npu": npu_copy}, fresh_copy, run_twin, emulated, tol,
                         root)

    verdict, reason = "pass", None
    if npu.error is not None:
        verdict = "fail"
        cuda_args = [a for a in req.args if "cuda" in a or "nccl" in a]
        reason = (f"the migrated twin failed{_frame_line(npu)}: {npu.error}; "
                  + (f"note: the script's arguments name CUDA ({' '.join(cuda_args)}), and both twins get them "
                     "as they are (rely on the script's defaults, or pass a config the migration rewrites); "
                     if cuda_args else "")
                  + f"log: {kept.get('migrated twin', 'rerun with --keep to keep it')}")
        path_diffs = []  # a crash explains every path not taken
        if first is None or "missing" in first["what"][0]:
            first = {"step": len(next(iter(npu.ranks.values()), {}).get("steps", [])) + 1, "rank": 0,
                     "what": [f"the migrated twin failed: {npu.error}"]}
    elif hidden and (first is None or hidden[0]["step"] <= first["step"]):
        verdict, reason = "fail", "silent CPU work in the migrated twin: " + hidden[0]["detail"]
        first = {"step": hidden[0]["step"], "rank": hidden[0]["rank"],
                 "what": ["silent CPU work: " + hidden[0]["detail"], *(first["what"] if first else [])]}
    elif path_diffs:
        verdict, reason = "fail", "the twins took different code paths: " + path_diffs[0]
    elif first is not None:
        verdict, reason = "fail", f"the twins diverge at step {first['step']}: " + "; ".join(first["what"])
    elif resume["status"] == "fail":
        verdict, reason = "fail", "resume round-trip: " + resume["detail"][0]
        if resume.get("first_divergence"):
            first = dict(resume["first_divergence"], what=["after resume: " + w
                                                           for w in resume["first_divergence"]["what"]])
    elif not rows:
        verdict, reason = "error", "no step was recorded in either twin (neither an optimizer step nor a backward())"
    result = dict(base, verdict=verdict, reason=reason, first_divergence=first, steps=rows, metrics=metrics,
                  resume=resume, silent_cpu=hidden, path_differences=path_diffs,
                  paths={"reference": compare.paths_of(ref), "migrated": compare.paths_of(npu)})
    code = {"pass": EXIT_PASS, "fail": EXIT_FAIL}.get(verdict, EXIT_ERROR)
    return _finish(req, result, code)


def _frame_of(result) -> str | None:
    for data in result.ranks.values():
        if data.get("frame"):
            return data["frame"]
    return None


def _original_frame(result, root: Path, copy: Path) -> None:
    """A crash frame in a migrated file (``train.py:45 ...``) as the user's own line
    (``train.py:43 ...``): the migration inserts lines (``import torch_npu``), so the
    copy's line number is mapped back to the original file where the line is unchanged."""
    import difflib

    for data in result.ranks.values():
        frame = data.get("frame")
        if not frame:
            continue
        location, _, text = frame.partition(" ")
        path, _, line = location.rpartition(":")
        try:
            number = int(line)
            old = (root / path).read_text("utf-8", errors="replace").splitlines()
            new = (copy / path).read_text("utf-8", errors="replace").splitlines()
        except (OSError, ValueError):
            continue
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if j1 <= number - 1 < j2:
                if tag == "equal":
                    data["frame"] = f"{path}:{i1 + number - j1} {text}".strip()
                else:  # a line the migration rewrote: name both
                    data["frame"] = f"{path}:{i1 + 1} (line {number} after the migration) {text}".strip()
                break


def _frame_line(result) -> str:
    frame = _frame_of(result)
    return f" at {frame}" if frame else ""


def _keep_logs(req: Request, work: Path | None, failed: list, suffix: str = "") -> dict[str, str]:
    """The run log of each failed twin, copied where it outlives the scratch directory:
    next to the report (``REPORT.<twin>.log``, ``REPORT.<twin>-<suffix>.log`` for the
    round-trip's restarts), else in a directory of its own."""
    if not failed:
        return {}
    if req.keep:
        return {r.name: str(r.out / "output.log") for r in failed}
    if req.report:
        folder, stem = Path(req.report).resolve().parent, Path(req.report).stem
    else:
        folder, stem = Path(tempfile.mkdtemp(prefix="npu-migrate-verify-logs-")), "verify"
    folder.mkdir(parents=True, exist_ok=True)
    kept = {}
    for r in failed:
        dest = folder / f"{stem}.{r.name.split()[0]}{'-' + suffix if suffix else ''}.log"
        try:
            shutil.copyfile(r.out / "output.log", dest)
        except OSError:
            continue
        kept[r.name] = str(dest)
    return kept


def _twin_info(result) -> dict:
    tail = result.log.strip().splitlines()[-15:]
    return {"status": "ok" if result.error is None else "failed", "error": result.error, "frame": _frame_of(result),
            "returncode": result.returncode, "steps": {r: len(d.get("steps", [])) for r, d in result.ranks.items()},
            "log_tail": tail}


def _resume(req: Request, ref, npu, copies: dict[str, Path], fresh_copy, run_twin, emulated: bool,
            tol: compare.Tolerance, root: Path) -> dict:
    """Stop both twins after step k and restart them; the restarted migrated twin must
    compute what the restarted reference computes. (Whether the script's own resume
    is exact, i.e. each restart equals its uninterrupted run, is reported beside:
    a script whose resume is not exact on CUDA is not exact after migration either.)

    Where a twin's uninterrupted run saved nothing after step k, its copy is already
    what a run stopped after step k leaves on disk (checkpoints are only written by
    torch.save), and the restart runs there; otherwise a fresh copy is stopped after
    step k first.

    A restart that fails is named by the user's own line, and its log is kept (as for
    the twins' first runs): where the original's own restart fails (facebookresearch/dino's
    checkpoint holds its argparse Namespace, which torch.load refuses since torch 2.6),
    the report says so and whether the migrated twin's restart fails at the same line.

    Where the uninterrupted twins are bit-identical, the migrated twin restarts first,
    alone, and the reference's restart is not run when the migrated one resumed after
    step k and is bit-identical to its own uninterrupted run (so to the reference's) at
    every later step: ``resume.reference_restart`` says so, or why the reference restarted."""
    if npu.error is not None or not npu.ranks:
        return {"status": "not-tried", "detail": ["the migrated twin did not run through"]}
    saves = ref.ranks.get(0, next(iter(ref.ranks.values()))).get("saves", [])
    points = [s for s in saves if 0 < s < req.steps]
    if not points:
        return {"status": "no-checkpoint", "detail": [
            (f"the script saved nothing with torch.save between steps 1 and {req.steps - 1} "
            f"(saves after steps {sorted(set(saves)) or 'none'}), so there is no point to resume from; "
            "give more --steps, or make the script checkpoint more often")]}
    k = max(points)
    records = npu.out.parent
    start, used = {}, {}

    def prepare(name: str):
        """Where twin ``name`` restarts (its own copy, a snapshot, or a fresh copy it is
        stopped in first), and the runs that restart it. Called in this thread: a fresh
        copy's migration changes the working directory."""
        full = ref if name == "ref" else npu

        def env(out, steps, align=None):
            base = twins.base_env(records / f"resume-{name}-{out}", steps, req.seed, align=align, resumed_after=k)
            return _ref_env(req, base, emulated) if name == "ref" else twins.npu_env(base, req.nproc, emulated)

        own_saves = full.ranks.get(0, next(iter(full.ranks.values()))).get("saves", [])
        copy, stop_first = copies[name], max(own_saves, default=0) != k
        start[name] = f"its own copy (its uninterrupted run saved nothing after step {k})"
        if stop_first:
            snap, why = twins.snapshot_after(full, copies[name], k)
            if snap is not None:
                copy, stop_first, start[name] = snap, False, why
            else:
                try:
                    copy = fresh_copy(name)
                except twins.MigrationError as exc:
                    raise VerifyError(str(exc)) from None
                start[name] = f"a fresh copy run to step {k} first ({why})"

        used[name] = copy

        def chain():
            label = "reference twin" if name == "ref" else "migrated twin"
            if stop_first:
                first = run_twin(f"{label}, stopped after step {k}", copy, env("stop", k), k, req.args)
                if first.error is not None:
                    return first
            return run_twin(f"{label}, restarted after step {k}", copy, env("restart", req.steps, full.out),
                            req.steps, [*req.args, *req.resume_args])

        return chain

    result: dict = {"stopped_after": k, "restart_args": [*req.args, *req.resume_args]}
    # Where the uninterrupted twins are bit-identical, the migrated twin restarts first, alone:
    # if its restart is bit-identical to its own uninterrupted run at every step after k, it
    # computes what the original's uninterrupted run computes there, and no restart of the
    # reference can change the verdict (docs/verify.md, "Resume round-trip"): it is not run.
    # In every other case the reference restarts too, and the verdict is decided as before.
    if compare.identical_runs(ref, npu):
        restarted = {"npu": prepare("npu")()}
        why_run, how, rows = _reference_restart_needed(restarted["npu"], ref, npu, k)
        if why_run is None:
            return _resume_without_reference(result, npu, restarted["npu"], k, start, how, rows)
        restarted["ref"] = prepare("ref")()
    else:
        why_run = "the twins' uninterrupted runs are not bit-identical"
        chains = {"ref": prepare("ref"), "npu": prepare("npu")}
        restarted = dict(zip(("ref", "npu"), _both(req, chains["ref"], chains["npu"])))
    result.update(restarted_from={"reference": start["ref"], "migrated": start["npu"]},
                  reference_restart=f"run: {why_run}")
    failed = [restarted[name] for name in ("ref", "npu") if restarted[name].error is not None]
    for name in ("ref", "npu"):
        _original_frame(restarted[name], root, used[name])
    if failed:
        kept = _keep_logs(req, None, failed, suffix="restart")
        result["logs"] = {r.name.split()[0]: kept[r.name] for r in failed if r.name in kept}
    log_of = {r: result.get("logs", {}).get(r, "rerun with --keep to keep it") for r in ("reference", "migrated")}
    if restarted["ref"].error is not None:
        # the same line of the user's file (each copy's text may differ there: the migration's rewrite)
        ref_at, npu_at = ((_frame_of(restarted[name]) or "").partition(" ")[0] for name in ("ref", "npu"))
        same = restarted["npu"].error is not None and ref_at and ref_at == npu_at
        return dict(result, status="reference-failed", detail=[
            f"the reference twin's stop-and-restart failed{_frame_line(restarted['ref'])} "
            f"({restarted['ref'].error}): no reference to compare with"
            + ("; the migrated twin's restart fails there too: the original's own restart fails with these "
               "arguments (not a migration problem)" if same else "")
            + f"; log: {log_of['reference']}"])
    if restarted["npu"].error is not None:
        return dict(result, status="fail", detail=[(f"the migrated twin's stop-and-restart failed"
                                                   f"{_frame_line(restarted['npu'])}: {restarted['npu'].error}; "
                                                   f"log: {log_of['migrated']}")],
                    first_divergence={"step": k + 1, "rank": 0, "what": [(f"the restarted migrated twin failed: "
                                                                         f"{restarted['npu'].error}")]})
    if req.reference == "cpu-retarget":
        compare.rename_device(restarted["ref"], "cpu", "npu")
    own_ref, own_npu = compare.own_resume(ref, restarted["ref"]), compare.own_resume(npu, restarted["npu"])
    rows, _, _ = compare.compare_runs(restarted["ref"], restarted["npu"], tol)
    first, better = compare.restores_more(rows, npu, restarted["npu"])
    result.update(reference=own_ref, migrated=own_npu, steps=rows)
    detail = [f"reference twin: {own_ref['status']}: {own_ref['detail']}",
              f"migrated twin: {own_npu['status']}: {own_npu['detail']}", *better[:1]]
    if first is not None:
        return dict(result, status="fail", first_divergence=first,
                    detail=[f"after the restart the migrated twin diverges from the restarted reference at step "
                            f"{first['step']}: " + "; ".join(first["what"]), *detail])
    status = "pass" if own_ref["status"] != "no-resume-path" else "no-resume-path"
    return dict(result, status=status, detail=[
        "the restarted migrated twin computes what the restarted reference computes"
        + (", except for state the migration restores and the original's checkpoint loses" if better else ""),
        *detail])


#: Why the reference twin's restart is left out (docs/verify.md, "Resume round-trip"),
#: by how the migrated twin's restart repeats its uninterrupted run.
REFERENCE_RESTART_NOT_NEEDED = {
    "exact": "reference restart not needed: the migrated resume is exact and the twins agree exactly",
    "not-measurable": ("reference restart not needed: the parameters never change in these steps, the migrated "
                       "restart repeats them bit for bit and the twins agree exactly"),
}


def _reference_restart_needed(restarted, ref, npu, k: int) -> tuple[str | None, str | None, list]:
    """``(why the reference twin must restart too, None, [])``, or ``(None, how the migrated
    twin's restart repeats its uninterrupted run, the rows comparing that restart with the
    reference's uninterrupted steps)`` where it need not, given bit-identical uninterrupted
    twins: the migrated restart must repeat its own uninterrupted run bit for bit
    (``compare.repeats_uninterrupted``), so the reference's too."""
    if restarted.error is not None:
        return "the migrated twin's restart failed", None, []
    how = compare.repeats_uninterrupted(npu, restarted, k)
    if how is None:
        own = compare.own_resume(npu, restarted)
        return f"the migrated twin's resume is not exact ({own['status']}: {own['detail']})", None, []
    first_step = min((s["step"] for d in restarted.ranks.values() for s in d.get("steps", [])), default=k + 1)
    rows, first, _ = compare.compare_runs(_after(ref, first_step - 1), restarted, compare.TOLERANCES["fp32"])
    if first is not None:  # implied by the checks above; checked all the same
        return (f"the migrated twin's restart differs from the reference's uninterrupted run at step {first['step']}",
                None, [])
    return None, how, rows


def _after(run, k: int):
    """``run`` with only its steps after step ``k``."""
    return replace(run, ranks={rank: dict(data, steps=[s for s in data.get("steps", []) if s["step"] > k])
                               for rank, data in run.ranks.items()})


def _resume_without_reference(result: dict, npu, restarted, k: int, start: dict, how: str, rows: list) -> dict:
    """The round-trip's result where the reference's restart was not needed: ``rows`` compare
    the restarted migrated twin, step by step, with the reference's uninterrupted run."""
    own_npu = compare.own_resume(npu, restarted)
    why = REFERENCE_RESTART_NOT_NEEDED[how]
    facts = ("the twins' uninterrupted runs are bit-identical at every step, and the migrated twin's restart is "
             + (f"bit-identical to its own from step {k + 1} on" if how == "exact" else
                "bit-identical to its own at every step it recorded"))
    not_run = {"status": "not-run", "detail": f"{why} ({facts})"}
    return dict(result, restarted_from={"reference": "not run", "migrated": start["npu"]},
                reference_restart=why, reference=not_run, migrated=own_npu, steps=rows, status="pass", detail=[
                    ("the restarted migrated twin computes what the reference's uninterrupted run computes"
                     + (f" after step {k}" if how == "exact" else "") + f", bit for bit; {why}"),
                    f"reference twin: not-run: {not_run['detail']}",
                    f"migrated twin: {own_npu['status']}: {own_npu['detail']}"])


def _both(req: Request, first, second, before_second=None) -> list:
    """``[first(), second()]``: the two twins' runs, at the same time with ``--jobs 2``;
    ``before_second()`` (in this thread) while the first starts."""
    if req.jobs < 2:
        if before_second is not None:
            before_second()
        return [first(), second()]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="verify-twin") as pool:
        futures = [pool.submit(first)]
        try:
            if before_second is not None:
                before_second()
            futures.append(pool.submit(second))
            return [future.result() for future in futures]
        except BaseException:  # Ctrl-C or SIGTERM in this thread: end both runs, then unwind
            twins.kill_running()
            raise


def _finish(req: Request, result: dict, code: int) -> int:
    text = report.summary(result)
    if req.report:
        try:
            written = report.write(result, Path(req.report))
        except OSError as exc:
            from npu_migrate.reporting.printable import printable

            print(f"npu-migrate verify: error: cannot write the report {printable(str(req.report))}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            code = EXIT_ERROR
        else:
            text += "  report: " + ", ".join(str(p) for p in written) + "\n"
    if not req.quiet or code != EXIT_PASS:
        sys.stdout.write(text)
    return code
