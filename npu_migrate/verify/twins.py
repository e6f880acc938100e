"""The two twins: how each copy is migrated, and how a run of it is started and read.

* the **migrated twin**: the normal migration (the project's configuration and
  the user's rule selection), run on the emulated NPU, or on a real NPU where
  ``torch_npu`` imports;
* the **reference twin**: the original source (with only the device-neutral fixes,
  :data:`NEUTRAL_RULES`), run on the same device with the CUDA-on-NPU layer
  (npu_migrate/verify/cuda_on_npu.py: CUDA calls served by the emulated NPU, as
  torch_npu's ``transfer_to_npu`` does on hardware), so the twins differ only by the
  static migration;
* or, with ``--reference cpu-retarget``, the older reference: the same source migrated
  by the same rules to the CPU target (npu_migrate/pipeline/target.py), run on the CPU
  with the CUDA-on-CPU layer (npu_migrate/verify/cuda_on_cpu.py).

A run is ``python -m npu_migrate.verify.entry SCRIPT ARGS`` (one process, or a
script that starts its own N processes with ``torch.multiprocessing.spawn``) or
``torchrun --nproc-per-node N -m npu_migrate.verify.entry SCRIPT ARGS`` with the
copy as working directory; the hook writes ``rank<R>.json`` / ``rank<R>.npz``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from npu_migrate.cli.options import Options

from . import hook, supervise
from .zygote import receive, send

#: Emulator variables a run must not inherit from the caller's environment.
_EMULATOR_VARS = ("NPU_MIGRATE_EMULATOR", "NPU_MIGRATE_EMULATOR_STRICT", "NPU_MIGRATE_EMULATOR_DEVICES",
                  "NPU_MIGRATE_EMULATOR_DENY_OPS")


class MigrationError(Exception):
    """A copy could not be migrated (one line)."""


def migrate_copy(copy: Path, options: Options) -> str:
    """Migrate ``copy`` in place with ``options`` (mode write, no cache); returns the
    migration's own output (diff summary, findings) for the report."""
    from contextlib import redirect_stderr, redirect_stdout

    from npu_migrate.cli import command
    from npu_migrate.pipeline import runner

    runner.preload()  # once per verify: each pass's workers are forked with the rules loaded
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(copy)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = command.run(options)
    finally:
        os.chdir(cwd)
    if code == command.EXIT_ERROR:
        raise MigrationError(f"the migration of the copy failed: {(err.getvalue() or out.getvalue()).strip()}")
    return out.getvalue() + err.getvalue()


def migrated_options(select, extend_select, ignore, extend_ignore, config) -> Options:
    """The user's migration: the project's configuration and the given selection."""
    return Options(paths=["."], mode="write", select=select, extend_select=list(extend_select), ignore=ignore,
                   extend_ignore=list(extend_ignore), config=config, cache=False, quiet=True, jobs=1, diff=False)


#: The migration's device-neutral fixes: what they change, a correct CUDA script would
#: need on any device (data order across epochs, the sharding of a shuffled DDP loader,
#: resume state, checkpoint loading). Applied to both twins (docs/verify.md), so that
#: the twins differ only by what the migration does for the device.
NEUTRAL_RULES = ("NPU401", "NPU402", "NPU501", "NPU502")


def neutral_options(ignore, extend_ignore, config) -> Options:
    """The reference's copy: the original with only the device-neutral fixes the user's
    migration also applies (the same ignores and configuration)."""
    return Options(paths=["."], mode="write", select=list(NEUTRAL_RULES), ignore=ignore,
                   extend_ignore=list(extend_ignore), config=config, cache=False, quiet=True, jobs=1, diff=False)


def changed_files(original: Path, copy: Path) -> list[str]:
    """Files of ``copy`` whose bytes differ from ``original``'s (what a migration changed)."""
    out = []
    for path in sorted(copy.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(copy)
        source = original / rel
        try:
            if not source.is_file() or source.read_bytes() != path.read_bytes():
                out.append(str(rel))
        except OSError:
            continue
    return out


def reference_options(empty_config: Path) -> Options:
    """The reference: every rule that knows the CPU target, nothing ignored."""
    from npu_migrate.pipeline.target import rule_ids_for

    return Options(paths=["."], mode="write", select=rule_ids_for("cpu"), config=str(empty_config), cache=False,
                   quiet=True, jobs=1, diff=False, target="cpu")


@dataclass
class RunResult:
    name: str
    out: Path
    returncode: int
    log: str
    timed_out: bool = False
    ranks: dict[int, dict] = field(default_factory=dict)

    def load(self) -> RunResult:
        for path in sorted(self.out.glob("rank*.json")):
            try:
                data = json.loads(path.read_text("utf-8"))
            except ValueError:
                continue
            self.ranks[int(data.get("rank", 0))] = data
        return self

    def params(self, rank: int):
        """Flat parameters per step of ``rank`` ({step: ndarray}), empty if not kept."""
        path = self.out / f"rank{rank}.npz"
        if not path.is_file():
            return {}
        import numpy as np

        with np.load(path) as data:
            return {int(key[4:]): data[key] for key in data.files}

    @property
    def error(self) -> str | None:
        """Why the run failed (None if it did not)."""
        if self.timed_out:
            return "timed out"
        for data in self.ranks.values():
            if data.get("status") == "crashed":
                return data.get("error") or "crashed"
        if self.returncode != 0:
            tail = [line for line in self.log.strip().splitlines() if line.strip()][-1:] or [""]
            return f"exited with status {self.returncode}: {tail[0]}"
        if not self.ranks:
            return "recorded nothing (did the script run a training step?)"
        return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command_line(script: str, args: list[str], nproc: int, torchrun: bool = False,
                 spawns: bool = False) -> list[str]:
    """``python -m npu_migrate.verify.entry SCRIPT ARGS``, under torchrun for ``nproc`` > 1
    unless the script starts its own processes (``spawns``: npu_migrate/verify/spawned.py)."""
    runner = ["-m", "npu_migrate.verify.entry", script, *args]
    if spawns or (nproc == 1 and not torchrun):
        return [sys.executable, *runner]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
            "127.0.0.1", "--master-port", str(_free_port()), *runner]


def base_env(out: Path, steps: int, seed: int, align: Path | None = None, resumed_after: int = 0) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _EMULATOR_VARS}
    env[hook.ENV_OUT] = str(out)
    env[hook.ENV_STEPS] = str(steps)
    env[hook.ENV_SEED] = str(seed)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # The run's temporary files stay in the scratch directory and go with it: torch makes
    # /tmp/torchinductor_<user> (its compile cache) at the first optimizer step, torchrun
    # torchelastic_* directories and, for a rank that fails, pytorch-errorfile-*.pickle
    # files it never removes; under the user's TMPDIR they outlived verify.
    tmp = Path(out) / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)  # tempfile falls back to /tmp when TMPDIR does not exist
    for name in ("TMPDIR", "TMP", "TEMP"):
        env[name] = str(tmp)
    env.pop(hook.ENV_ALIGN, None)
    env.pop(hook.ENV_CPU, None)
    env.pop(hook.ENV_REFERENCE, None)
    env.pop(hook.ENV_RESUMED_AFTER, None)
    env.pop(hook.ENV_DEVICES, None)
    env.pop(hook.ENV_ROOT, None)
    env.pop(hook.ENV_PORT, None)
    env.pop(hook.ENV_SNAPSHOT, None)
    if align is not None:
        env[hook.ENV_ALIGN] = str(align)
        env[hook.ENV_RESUMED_AFTER] = str(resumed_after)
    return env


def with_snapshots(env: dict[str, str]) -> dict[str, str]:
    """``env`` for an uninterrupted run that also keeps a snapshot of its project copy after
    the last step it saved after (hook.ENV_SNAPSHOT): the resume round-trip can restart
    there instead of running a copy to that step first. One process only."""
    return dict(env, **{hook.ENV_SNAPSHOT: str(Path(env[hook.ENV_OUT]) / "snapshot")})


def snapshot_after(result: RunResult, copy: Path, k: int) -> tuple[Path | None, str]:
    """The snapshot ``result``'s run took of ``copy`` after step ``k``, where it stands for
    a run stopped after step k: the run stopped at its last step (not by its own end) and
    wrote nothing into its copy while it unwound from that stop (the listing taken at the
    stop equals the tree afterwards), so a stop after step k leaves what the snapshot holds.
    Otherwise None, and why."""
    snap = result.out / "snapshot" / f"after-step-{k}"
    if not snap.is_dir():
        return None, f"no snapshot after step {k}"
    try:
        at_stop = json.loads((result.out / hook.TREE_AT_STOP).read_text("utf-8"))
    except (OSError, ValueError):
        return None, "the run did not stop at its last step"
    if at_stop != hook.tree_listing(str(copy)):
        return None, "the script wrote into its copy while it unwound from the stop"
    return snap, f"a snapshot its uninterrupted run took after step {k}"


def reference_env(env: dict[str, str], nproc: int, emulated: bool = True) -> dict[str, str]:
    """The reference twin: the original source on the device the migrated twin uses
    (the emulated NPU, or a real one), CUDA served by it."""
    env = npu_env(env, nproc, emulated)
    env[hook.ENV_REFERENCE] = "1"
    return env


def cpu_env(env: dict[str, str], nproc: int = 1) -> dict[str, str]:
    env = dict(env)
    env[hook.ENV_CPU] = "1"
    env[hook.ENV_DEVICES] = str(nproc)  # torch.cuda.device_count(), as the emulator's device count
    return env


def npu_env(env: dict[str, str], nproc: int, emulated: bool) -> dict[str, str]:
    if not emulated:
        return env
    from npu_migrate.emulate.launcher import child_env

    return child_env(nproc, base=env)


def real_npu(copy: Path, script: str) -> str | None:
    """Where a real torch_npu imports from (then the migrated twin runs on it)."""
    from npu_migrate.emulate.detect import find_real_torch_npu
    from npu_migrate.emulate.launcher import child_search_path

    return find_real_torch_npu(child_search_path(str(copy / script), dict(os.environ)))


#: Supervisors of the runs under way (a run per twin at the same time with --jobs 2).
_RUNNING: set[int] = set()
#: Seconds a supervisor gets to end its run's tree before its group is SIGKILLed.
_GRACE_S = 5.0


def kill_running() -> None:
    """End every run under way: each supervisor ends its tree (npu_migrate/verify/supervise.py),
    and the threads waiting on the runs then sweep for what is left."""
    import time

    for pid in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + _GRACE_S
    while _RUNNING and time.monotonic() < end:
        time.sleep(0.05)
    for pid in list(_RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


#: Held while a supervisor starts (until it is in _RUNNING) and while orphans are ended.
_STARTING = threading.Lock()


def _end_orphans() -> list[int]:
    """End the processes re-parented to verify: verify is a child subreaper too, so a run
    whose supervisor was killed (by the script itself: ``os.kill(os.getppid(), 9)``)
    hands its tree to verify instead of init, and a process that also cleared its
    environment (no marker for :func:`supervise.sweep`) is still found. Verify's only
    children are the supervisors, so every other descendant, and its tree, is such an
    orphan. Returns the pids killed."""
    me = os.getpid()
    with _STARTING:
        # Only the trees of verify's own children that are no supervisor: one snapshot of
        # /proc, and a process a supervisor's run forks meanwhile (the other twin's, with
        # --jobs 2) is below that supervisor, never such a root. Listing every descendant
        # and then sparing the supervisors' trees, from two reads of /proc, SIGKILLed a
        # run forked between them (a restarted twin's -9, seen under load in CI).
        children = supervise.children_of()
        roots = [pid for pid in children.get(me, ()) if pid not in _RUNNING]
        orphans = roots + supervise.below(roots, children)
        supervise._stop_and_kill(orphans)
    for pid in orphans:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)  # a direct child (re-parented here): reaped; others: ECHILD
    return orphans


def _end(proc: subprocess.Popen, token: str) -> int:
    """End a run (its supervisor first, then its group, then anything carrying its marker)
    and wait for it; returns its status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    code = proc.wait()
    supervise.sweep(token)
    _end_orphans()
    return code


class Server:
    """The fork server of one twin's one-process runs (npu_migrate/verify/zygote.py; on by default,
    off with --no-fork-server or NPU_MIGRATE_FORK_SERVER=0), under a supervisor of its own."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = str(folder / "server.sock")
        self.token = secrets.token_hex(16)
        env = {k: v for k, v in env.items() if not k.startswith("NPU_MIGRATE_VERIFY_")}
        env[supervise.MARKER] = self.token
        command = [sys.executable, "-m", "npu_migrate.verify.supervise", "--parent", str(os.getpid()), "--",
                   sys.executable, "-m", "npu_migrate.verify.zygote", self.path]
        supervise._prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)
        with open(folder / "server.log", "w", encoding="utf-8") as log, _STARTING:
            self.proc = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            _RUNNING.add(self.proc.pid)
        self.forked: list[str] = []

    def ready(self, timeout: float = 120.0) -> bool:
        import time

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            if os.path.exists(self.path):
                return True
            time.sleep(0.05)
        return False

    def spare(self) -> frozenset[int]:
        return frozenset([self.proc.pid, *supervise.descendants(self.proc.pid)])

    def close(self) -> None:
        try:
            _end(self.proc, self.token)
        finally:
            _RUNNING.discard(self.proc.pid)


def _run_forked(server: Server, name: str, copy: Path, script: str, args: list[str], env: dict[str, str],
                timeout: float, out: Path, log_path: Path, token: str) -> RunResult | None:
    """The run forked by ``server``; None where it must be a fresh process."""
    if not server.ready():
        return None
    spare, pid = server.spare(), None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(60)
        conn.connect(server.path)
        log_path.write_text("", "utf-8")
        send(conn, {"argv": [script, *args], "cwd": str(copy), "env": env, "log": str(log_path)})
        first = receive(conn)
        if "fresh" in first:
            server.forked.append(f"{name}: fresh ({first['fresh']})")
            return None
        pid, timed_out = first["pid"], False
        conn.settimeout(timeout)
        try:
            code = receive(conn)["status"]
        except TimeoutError:
            timed_out = True
            supervise._stop_and_kill([pid, *supervise.descendants(pid)])
            conn.settimeout(60)
            code = receive(conn)["status"]
    except (OSError, EOFError, ValueError):
        if pid is None:  # not started: a fresh process instead
            return None
        server.forked.append(f"{name}: forked; the server died during the run")
        return RunResult(name=name, out=out, returncode=-9, log="the fork server died during the run").load()
    finally:
        conn.close()
        supervise.sweep(token)
        supervise.sweep(server.token, spare=spare)
        _end_orphans()
    server.forked.append(f"{name}: forked")
    text = log_path.read_text("utf-8", errors="replace")
    return RunResult(name=name, out=out, returncode=code, log=text, timed_out=timed_out).load()


def run(name: str, copy: Path, script: str, args: list[str], nproc: int, env: dict[str, str],
        timeout: float, torchrun: bool = False, spawns: bool = False, server: Server | None = None) -> RunResult:
    out = Path(env[hook.ENV_OUT])
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "output.log"
    token = secrets.token_hex(16)
    env = dict(env, **{supervise.MARKER: token})
    if server is not None and nproc == 1 and not torchrun and not spawns:
        forked = _run_forked(server, name, copy, script, args, dict(env, **{hook.ENV_PORT: str(_free_port())}),
                             timeout, out, log_path, token)
        if forked is not None:
            return forked
    line = command_line(script, args, nproc, torchrun, spawns)
    command = [sys.executable, "-m", "npu_migrate.verify.supervise", "--parent", str(os.getpid()), "--", *line]
    with open(log_path, "w", encoding="utf-8") as log:
        # A session of its own (a closed terminal's SIGHUP is verify's to handle), under a
        # supervisor that ends everything the run starts: npu_migrate/verify/supervise.py.
        if "torch.distributed.run" not in line:  # torchrun's workers use torchrun's port
            env = dict(env, **{hook.ENV_PORT: str(_free_port())})
        supervise._prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)  # orphans of a killed supervisor: _end_orphans
        with _STARTING:
            proc = subprocess.Popen(command, cwd=copy, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            _RUNNING.add(proc.pid)
        try:
            code, timed_out = proc.wait(timeout=timeout), False
            code = _end(proc, token)
        except subprocess.TimeoutExpired:
            code, timed_out = _end(proc, token), True
        except BaseException:  # Ctrl-C, SIGTERM or SIGHUP (verify's handler raises SystemExit): end the run too
            _end(proc, token)
            raise
        finally:
            _RUNNING.discard(proc.pid)
    if code > 128 and not timed_out:
        code = -(code - 128)  # the script died of signal N (the supervisor exits 128+N)
    text = log_path.read_text("utf-8", errors="replace")
    return RunResult(name=name, out=out, returncode=code, log=text, timed_out=timed_out).load()
