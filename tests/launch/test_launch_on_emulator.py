"""The generated launchers, run as they are, start the migrated bundled example with
2 processes on the emulated NPU (backend hccl).

Only what the launchers read for any user is set: ``PYTHON`` (the interpreter with
torch, here the test's), ``MASTER_PORT`` (a free one) and the platform's variables
for ModelArts / ranktable mode; the emulator comes in through ``PYTHONPATH`` exactly
as ``npu-migrate emulate`` puts it there. The emulated NPU is not an Ascend node (no
npu-smi, driver, CANN or torch_npu), and the node preflight says so and stops the
launch (the first test); the training runs skip it with ``NPU_PREFLIGHT=0``.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.emulate.launcher import child_env

pytestmark = pytest.mark.slow

CARDS = 2


@pytest.fixture(scope="module")
def emulator_build():
    from npu_migrate.emulate.build import build

    return build()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(demo: Path, target: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "npu_migrate", "launch", "train.py", "--cards", str(CARDS), "-t",
                           target, "--write", "--", "--epochs", "2"],
                          cwd=demo, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = child_env(nproc=CARDS)
    for key in ("MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK_TABLE_FILE", "RANK_ID", "MA_NUM_HOSTS",
                "VC_TASK_INDEX", "VC_WORKER_HOSTS", "NPU_PREFLIGHT"):
        env.pop(key, None)
    return {**env, "PYTHON": sys.executable, "MASTER_PORT": str(_free_port()), "NPU_PREFLIGHT": "0", **extra}


def _losses(text: str) -> list[str]:
    # The ranks share stdout, so their lines may interleave.
    return re.findall(r"epoch \d+ loss [\d.]+: peak [\d.]+ MiB on Ascend \(npu-migrate emulated NPU\)", text)


def _run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # Started from elsewhere: the launcher finds the project root itself.
    return subprocess.run(["bash", str(script)], env=env, cwd=script.anchor, capture_output=True, text=True,
                          timeout=600, check=False)


def test_the_preflight_stops_the_launch_on_an_emulated_npu(emulator_build, migrated_example):
    _launch(migrated_example, "torchrun")
    proc = _run(migrated_example / "launch" / "torchrun.sh", {**_env({}), "NPU_PREFLIGHT": "1"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "npus: no NPU on this node" in proc.stdout and "is ready" not in proc.stderr
    assert _losses(proc.stdout) == []  # nothing trained


def test_torchrun_launcher_trains_the_migrated_example_on_two_emulated_npus(emulator_build, migrated_example):
    _launch(migrated_example, "torchrun")
    proc = _run(migrated_example / "launch" / "torchrun.sh", _env({}))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    losses = _losses(proc.stdout)
    assert len(losses) == 2 * CARDS, proc.stdout  # 2 epochs on each of the 2 ranks
    assert (migrated_example / "checkpoint.pt").is_file()


def test_ranktable_launcher_trains_one_process_per_card(emulator_build, migrated_example, tmp_path):
    _launch(migrated_example, "ranktable")
    table = tmp_path / "hccl.json"
    table.write_text(json.dumps({
        "status": "completed", "version": "1.0", "server_count": "1",
        "server_list": [{"server_id": "127.0.0.1", "device": [
            {"device_id": str(i), "device_ip": f"192.168.100.{101 + i}", "rank_id": str(i)} for i in range(CARDS)]}],
    }), encoding="utf-8")
    proc = _run(migrated_example / "launch" / "ranktable.sh",
                _env({"RANK_TABLE_FILE": str(table), "NPU_RUNTIME_HOST_IP": "127.0.0.1"}))
    logs = {r: (migrated_example / "logs" / f"rank_{r}.log").read_text(encoding="utf-8") for r in range(CARDS)}
    assert proc.returncode == 0, proc.stderr[-3000:] + json.dumps(logs)[-3000:]
    for rank in range(CARDS):
        assert len(_losses(logs[rank])) == 2, logs[rank]


def test_modelarts_boot_script_trains_with_the_platform_variables(emulator_build, migrated_example):
    _launch(migrated_example, "modelarts")
    env = _env({"MA_NUM_HOSTS": "1", "MA_NUM_GPUS": str(CARDS), "VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "127.0.0.1"})
    proc = _run(migrated_example / "launch" / "modelarts.sh", env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(_losses(proc.stdout)) == 2 * CARDS, proc.stdout
