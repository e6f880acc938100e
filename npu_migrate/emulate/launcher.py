"""``npu-migrate emulate``: run a script (or a torchrun job) on the emulated NPU."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from . import SITE_DIR
from .detect import find_real_torch_npu

EXIT_REFUSED = 3
EXIT_BUILD_FAILED = 4

ENV_STRICT = "NPU_MIGRATE_EMULATOR_STRICT"
ENV_DEVICES = "NPU_MIGRATE_EMULATOR_DEVICES"
ENV_ACTIVE = "NPU_MIGRATE_EMULATOR"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_search_path(script: str, env: dict[str, str]) -> list[str]:
    """The sys.path a child ``python SCRIPT`` would start from (minus the emulator)."""
    entries = [str(Path(script).resolve().parent)]
    entries += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    entries += [p for p in sys.path if p]
    return entries


# Launchers that start their own workers; their process-count option decides
# how many emulated devices the workers need (each takes npu:LOCAL_RANK).
_WORKER_COUNT_OPTIONS = {
    "accelerate": ("--num_processes", "--num-processes"),
    "torchrun": ("--nproc-per-node", "--nproc_per_node"),
}


def resolve_script(script: str) -> str | None:
    """*script* itself if it is a file, else a Python command of that name on PATH.

    So ``npu-migrate emulate accelerate launch train.py`` and ``... torchrun
    --nproc-per-node 2 train.py`` run those launchers under the emulator.
    """
    if Path(script).is_file():
        return script
    found = shutil.which(script)
    if found is None:
        return None
    try:
        with open(found, "rb") as f:
            first = f.readline()
    except OSError:
        return None
    return found if first.startswith(b"#!") and b"python" in first else None


def launcher_workers(script: str, args: list[str]) -> int | None:
    """Workers a launcher command (accelerate launch, torchrun) will start, if it says."""
    options = _WORKER_COUNT_OPTIONS.get(Path(script).name)
    if options is None:
        return None
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in options:
            value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                return max(int(value), 1)
            except ValueError:
                return None
    return None


def child_env(
    nproc: int = 1, strict: bool = False, base: dict[str, str] | None = None
) -> dict[str, str]:
    """Environment for processes that run on the emulated NPU."""
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + old if old else "")
    env.setdefault(ENV_DEVICES, str(max(int(nproc), 1)))
    # Run to run determinism (docs/emulator.md, "Determinism"): str/bytes hashing is
    # randomised per process, so a vocabulary built as list(set(text)) is ordered
    # differently in every run and in every spawned rank. A value the user set is kept.
    env.setdefault("PYTHONHASHSEED", "0")
    if strict:
        env[ENV_STRICT] = "1"
    env[ENV_ACTIVE] = "1"
    return env


def run(script: str, args: list[str], nproc: int = 1, strict: bool = False) -> int:
    """Run *script* with *args* on the emulated NPU; return its exit code.

    ``nproc`` > 1 starts ``torch.distributed.run`` with that many local workers.
    Refuses (exit code 3) where a real torch_npu is importable.
    """
    if nproc < 1:
        print("npu-migrate emulate: --nproc must be at least 1", file=sys.stderr)
        return 2
    resolved = resolve_script(script)
    if resolved is None:
        print(f"npu-migrate emulate: no such script: {script}", file=sys.stderr)
        return 2
    script = resolved
    env = child_env(max(nproc, launcher_workers(script, args) or 1), strict)
    real = find_real_torch_npu(child_search_path(script, env))
    if real is not None:
        print(
            "npu-migrate emulate: refusing to run: a real torch_npu is importable "
            f"({real}). The emulated NPU must never stand in for real hardware; "
            "run the script directly instead.",
            file=sys.stderr,
        )
        return EXIT_REFUSED

    from .build import BuildError, build

    try:
        build()
    except BuildError as exc:
        print(f"npu-migrate emulate: {exc}", file=sys.stderr)
        return EXIT_BUILD_FAILED

    if nproc == 1:
        cmd = [sys.executable, script, *args]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(nproc),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(_free_port()),
            script,
            *args,
        ]
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130
