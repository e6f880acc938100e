"""Fixtures for the emulated-NPU tests.

The emulator is never imported into the pytest process (it would rename
PrivateUse1 and register ``torch.npu`` for every other test); scripts run in
subprocesses through the real launcher. The C++ extension is built once per
session (and cached across sessions, see docs/emulator.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture(scope="session")
def emulator_build() -> Path:
    from npu_migrate.emulate.build import build

    return build()


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for key in (
        "NPU_MIGRATE_EMULATOR_STRICT",
        "NPU_MIGRATE_EMULATOR_DENY_OPS",
        "NPU_MIGRATE_EMULATOR_DEVICES",
        "NPU_MIGRATE_EMULATOR",
    ):
        env.pop(key, None)
    env.update(extra or {})
    return env


def run_emulated(
    script: Path | str,
    *args: str,
    nproc: int = 1,
    strict: bool = False,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "npu_migrate.emulate", "--nproc", str(nproc)]
    if strict:
        cmd.append("--strict")
    cmd += [str(script), *args]
    return subprocess.run(
        cmd,
        env=_clean_env(env),
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def json_report(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def basics(emulator_build) -> dict:
    return json_report(
        run_emulated(
            SCRIPTS / "probe_basics.py", env={"NPU_MIGRATE_EMULATOR_DEVICES": "2"}
        )
    )


@pytest.fixture(scope="session")
def training(emulator_build) -> dict:
    return json_report(
        run_emulated(SCRIPTS / "train_compare.py", "fp32", "cnn", "amp", "lstm")
    )


@pytest.fixture(scope="session")
def op_parity(emulator_build) -> dict:
    return json_report(run_emulated(SCRIPTS / "op_parity.py"))
