"""Fixtures and helpers of the end-to-end tests: CUDA training scripts are migrated
with the real ``npu-migrate`` CLI, run on the emulated NPU in subprocesses, and
compared with hand-written CPU references (docs/e2e.md).

The emulator is never imported into the pytest process; its C++ extension is
built (or found in its on-disk cache) once per session.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
E2E = REPO / "fixtures" / "e2e"
REPORT_MODULE = "e2e_report.py"
RUN_TIMEOUT_S = 300

_LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE")
_EMULATOR_VARS = ("NPU_MIGRATE_EMULATOR_STRICT", "NPU_MIGRATE_EMULATOR_DENY_OPS",
                  "NPU_MIGRATE_EMULATOR_DEVICES", "NPU_MIGRATE_EMULATOR")


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """One intra-op thread (CPU kernels reduce in a thread-count dependent order,
    and CI has 2 cores), no inherited launcher or emulator variables."""
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCH_VARS + _EMULATOR_VARS}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore")
    env.update(extra or {})
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def emulator_cmd(script: Path, args, nproc: int = 1) -> list[str]:
    return [sys.executable, "-m", "npu_migrate.emulate", "--nproc", str(nproc), str(script), *map(str, args)]


def torchrun_cmd(script: Path, args, nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), str(script), *map(str, args)]


def reference_cmd(script: Path, args, nproc: int = 1) -> list[str]:
    if nproc == 1:
        return [sys.executable, str(script), *map(str, args)]
    return torchrun_cmd(script, args, nproc)


def emulator_env(nproc: int = 1) -> dict[str, str]:
    """What ``npu-migrate emulate`` gives its processes (the stand-in torch_npu on the
    path), for launching them some other way (torchrun with one process)."""
    from npu_migrate.emulate.launcher import child_env

    return child_env(nproc, base={})


@dataclass
class Run:
    cmd: list[str]
    returncode: int
    output: str

    def describe(self) -> str:
        return f"$ {' '.join(self.cmd)}\nexit {self.returncode}\n{self.output[-6000:]}"


def run_all(*cmds: list[str], cwd: Path, env: dict[str, str] | None = None,
            envs: list[dict[str, str] | None] | None = None) -> list[Run]:
    """Run commands concurrently (each is single-threaded) and wait for all. ``env`` adds
    variables to every command's environment, ``envs`` to each command's own."""
    extras = envs if envs is not None else [env] * len(cmds)
    procs = [subprocess.Popen(c, cwd=cwd, env=subprocess_env(e), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for c, e in zip(cmds, extras)]
    runs = []
    for cmd, proc in zip(cmds, procs):
        try:
            out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            out += f"\n[killed after {RUN_TIMEOUT_S}s]"
        runs.append(Run(cmd, proc.returncode, out))
    return runs


def load_result(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def result_paths(out: Path, nproc: int) -> list[Path]:
    return [out] + [out.with_name(f"{out.name}.rank{r}") for r in range(1, nproc)]


def _floats(record: dict):
    import numpy as np

    return np.frombuffer(base64.b64decode(record["f32"]), dtype=np.float32).reshape(record["shape"])


def compare_results(migrated: dict, reference: dict, tolerance=None, npu_only_notes=frozenset()) -> list[str]:
    """Differences between two result files, as sentences; empty when they agree.

    ``tolerance`` None means bit-for-bit: the same loss bits at every step and the
    same bits in every floating-point parameter and buffer."""
    import numpy as np

    problems: list[str] = []
    for key in ("world_size", "first_step"):
        if migrated[key] != reference[key]:
            problems.append(f"{key}: migrated {migrated[key]} vs reference {reference[key]}")
    ml, rl = migrated["losses"], reference["losses"]
    if len(ml) != len(rl):
        problems.append(f"{len(ml)} losses recorded by the migrated run vs {len(rl)} by the reference")
    mf = [float.fromhex(x) for x in ml]
    rf = [float.fromhex(x) for x in rl]
    if tolerance is None:
        diff = [i for i, (a, b) in enumerate(zip(ml, rl)) if a != b]
        if diff:
            i = diff[0]
            problems.append(f"losses differ bitwise at {len(diff)} step(s), first at step "
                            f"{(migrated['first_step'] or 0) + i}: {mf[i]!r} vs {rf[i]!r}")
    else:
        worst = max((abs(a - b) for a, b in zip(mf, rf)), default=0.0)
        if not worst <= tolerance.loss_atol:
            problems.append(f"loss difference {worst:.3g} exceeds {tolerance.loss_atol}")
    ms, rs = migrated["state"], reference["state"]
    if set(ms) != set(rs):
        problems.append(f"state keys differ: only migrated {sorted(set(ms) - set(rs))}, "
                        f"only reference {sorted(set(rs) - set(ms))}")
    for name in sorted(set(ms) & set(rs)):
        a, b = _floats(ms[name]), _floats(rs[name])
        if a.shape != b.shape:
            problems.append(f"{name}: shape {a.shape} vs {b.shape}")
            continue
        if tolerance is None:
            if a.tobytes() != b.tobytes():
                problems.append(f"{name}: {int((a != b).sum())} value(s) differ bitwise, "
                                f"max |diff| {float(np.max(np.abs(a.astype(np.float64) - b))):.3g}")
        else:
            worst = float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0))
            if not worst <= tolerance.state_atol:
                problems.append(f"{name}: max |diff| {worst:.3g} exceeds {tolerance.state_atol}")
    if tolerance is None and not problems and migrated["state_sha256"] != reference["state_sha256"]:
        problems.append("state checksums differ")
    me, re_ = migrated["extra"], reference["extra"]
    for key in sorted(set(me) | set(re_)):
        if key in npu_only_notes:
            continue
        if key not in me or key not in re_:
            problems.append(f"note {key!r} recorded by only one run")
        elif me[key] != re_[key] and tolerance is None:
            problems.append(f"note {key!r}: migrated {me[key]!r} vs reference {re_[key]!r}")
    return problems


@dataclass
class Workspace:
    root: Path
    original: Path  # untouched CUDA scripts (negative control)
    migrated: Path  # the same scripts after `npu-migrate --write`
    reference: Path  # hand-written CPU references
    migrate_run: Run
    report: dict

    def file_report(self, name: str) -> dict:
        for entry in self.report["files"]:
            if Path(entry["path"]).name == f"{name}.py":
                return entry
        return {"path": f"{name}.py", "changed": False, "fixes": [], "findings": [], "error": None}


def _copy_scripts(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True)
    for script in src.glob("*.py"):
        shutil.copy2(script, dst / script.name)
    shutil.copy2(E2E / REPORT_MODULE, dst / REPORT_MODULE)


@pytest.fixture(scope="session")
def emulator_build() -> Path:
    """The emulator's C++ extension: built once, then found in its on-disk cache."""
    from npu_migrate.emulate.build import build

    return build()


def _migrate(root: Path, folder: str, *options: str) -> tuple[Run, dict]:
    report_path = root / f"{folder}.report.json"
    cmd = [sys.executable, "-m", "npu_migrate", "--write", "--no-cache", "--report", str(report_path), *options,
           folder]
    proc = subprocess.run(cmd, check=False, cwd=root, env=subprocess_env(), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    report = load_result(report_path) if report_path.exists() else {"files": []}
    return Run(cmd, proc.returncode, proc.stdout + proc.stderr), report


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Workspace:
    """All scripts copied and migrated once per session, with the real CLI. Scripts that
    need opt-in rules are migrated by a second run that selects them, and only them."""
    from .specs import SCRIPTS

    root = tmp_path_factory.mktemp("e2e")
    original, migrated, reference = root / "original", root / "migrated", root / "reference"
    _copy_scripts(E2E / "cuda", original)
    _copy_scripts(E2E / "cuda", migrated)
    _copy_scripts(E2E / "cpu", reference)
    opt_in = [s for s in SCRIPTS if s.extend_select]
    run, report = _migrate(root, "migrated", *[arg for s in opt_in for arg in ("--exclude", f"{s.name}.py")])
    for spec in opt_in:
        extra_run, extra = _migrate(root, f"migrated/{spec.name}.py", "--extend-select", ",".join(spec.extend_select))
        report["files"] += extra["files"]
        if extra_run.returncode != 0:
            run = extra_run
    return Workspace(root, original, migrated, reference, run, report)


@pytest.fixture(scope="session")
def migrated_without_npu401(workspace) -> Path:
    """Control: the scripts migrated with every rule but NPU401 (GradScaler state in
    checkpoints), to show that the kill-and-resume fixtures need that rule."""
    _copy_scripts(E2E / "cuda", workspace.root / "without_npu401")
    run, _ = _migrate(workspace.root, "without_npu401", "--ignore", "NPU401")
    assert run.returncode == 0, run.describe()
    return workspace.root / "without_npu401"


class References:
    """The CPU reference runs, each (script, arguments, processes) once per session.

    A reference is deterministic (one thread, fixed seeds), and several tests compare
    against the same one: the plain one-process run (test_training_scripts, and the
    torchrun and checkpoint tests of test_data_parallel), the global-batch run (three
    data-parallel tests). Each test still runs its own migrated side; a reference it
    needs and nobody ran yet runs beside it, as before."""

    def __init__(self, root: Path, scripts: Path) -> None:
        self.root, self.scripts = root / "references", scripts
        self.root.mkdir()
        self._done: dict[tuple, tuple[Run, Path]] = {}

    def _out(self, key: tuple) -> Path:
        return self.root / f"{key[0]}_np{key[2]}_{hashlib.sha256(repr(key).encode()).hexdigest()[:12]}.json"

    def run_beside(self, cmds: list[list[str]], refs: list[tuple[str, tuple[str, ...], int]], cwd: Path,
                   envs: list[dict[str, str] | None] | None = None) -> tuple[list[Run], list[tuple[Run, Path]]]:
        """Run ``cmds`` (with ``envs``) and the references ``refs`` (script name, arguments
        without ``--out``, processes) not run yet, all at once; return the runs of
        ``cmds`` and, per reference, its run and result file."""
        keys = [(name, tuple(args), nproc) for name, args, nproc in refs]
        missing = list(dict.fromkeys(k for k in keys if k not in self._done))
        ref_cmds = [reference_cmd(self.scripts / f"{k[0]}.py", [*k[1], "--out", self._out(k)], k[2]) for k in missing]
        runs = run_all(*cmds, *ref_cmds, cwd=cwd, envs=[*(envs or [None] * len(cmds)), *[None] * len(ref_cmds)])
        for key, run in zip(missing, runs[len(cmds):]):
            self._done[key] = (run, self._out(key))
        return runs[:len(cmds)], [self._done[k] for k in keys]


@pytest.fixture(scope="session")
def references(workspace) -> References:
    return References(workspace.root, workspace.reference)
