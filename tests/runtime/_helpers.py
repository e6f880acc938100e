"""Helpers shared by the runtime tests: clean child environments, free ports, ranktable files.

The runtime tests need only torch, numpy, pytest and hypothesis: the distribution test
(test_distribution.py) copies this folder and runs it against a wheel of npu-runtime
installed alone, so nothing here may import npu_migrate or reach outside this folder.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


#: HCCL's default ports (HCCL_IF_BASE_PORT 60000, 16 of them): inside Linux's ephemeral
#: range, and a MASTER_PORT among them is a preflight finding of its own
HCCL_PORTS = range(60000, 60016)


def free_port() -> int:
    """A free TCP port, never one of HCCL's (a test would then get a second finding)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in HCCL_PORTS:
            return port


def child_env(**extra: str) -> dict:
    """A clean environment for a child process: no inherited launcher variables."""
    drop = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "GROUP_RANK", "TORCHELASTIC_RUN_ID", "RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE",
            "ASCEND_DEVICE_ID", "DEVICE_ID", "MA_NUM_HOSTS", "VC_TASK_INDEX", "MA_NUM_GPUS",
            "VC_WORKER_HOSTS", "NPU_RUNTIME_WATCHDOG", "NPU_RUNTIME_WATCHDOG_TIMEOUT", "NPU_RUNTIME_INSTALLED",
            "NPU_RUNTIME_WATCHDOG_DIR", "HCCL_EXEC_TIMEOUT", "TORCHELASTIC_RESTART_COUNT",
            "NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT", "NPU_RUNTIME_HEARTBEAT_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    if "NPU_RUNTIME_WATCHDOG_TIMEOUT" in extra:  # the tests' hangs before a first step are caught as quickly
        env.setdefault("NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT", extra["NPU_RUNTIME_WATCHDOG_TIMEOUT"])
    return env


def write_ranktable_v1(path: Path, servers: list[tuple[str, list[int]]], status: str = "completed") -> Path:
    rank = 0
    server_list = []
    for server_id, dev_ids in servers:
        devs = []
        for d in dev_ids:
            devs.append({"device_id": str(d), "device_ip": f"192.168.{rank}.1", "rank_id": str(rank)})
            rank += 1
        server_list.append({"server_id": server_id, "host_ip": server_id, "device": devs})
    path.write_text(json.dumps({"status": status, "version": "1.0", "server_count": str(len(servers)),
                                "server_list": server_list}))
    return path


def write_ranktable_legacy(path: Path, servers: list[tuple[str, list[int]]]) -> Path:
    instances = [
        {"pod_name": str(i), "server_id": sid, "devices": [{"device_id": str(d), "device_ip": "1.1.1.1"} for d in devs]}
        for i, (sid, devs) in enumerate(servers)
    ]
    path.write_text(json.dumps({"status": "completed", "group_count": "1", "group_list": [
        {"group_name": "worker", "device_count": str(sum(len(d) for _, d in servers)),
         "instance_count": str(len(servers)), "instance_list": instances}]}))
    return path



def run_python(code: str, *args: str, env: dict | None = None, timeout: float = 120,
               cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (clean environment); never hangs the test."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env or child_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_script(directory: Path, code: str, *args: str, env: dict | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` as ``directory/job.py`` (spawned workers re-import the main module,
    which ``python -c`` does not have)."""
    script = Path(directory) / "job.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script), *map(str, args)], env=env or child_env(), cwd=directory,
                          capture_output=True, text=True, timeout=timeout, check=False)


def alive(pid: int) -> bool:
    """Is ``pid`` a live process (a zombie counts as dead)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")
