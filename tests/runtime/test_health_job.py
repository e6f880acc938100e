"""A 2-process job watched by the runtime: a NaN on one rank, a rank that stalls, a rank
killed by a (simulated) device fault; each gives the expected events, exit classes and
``diagnose`` verdicts (the restart decision a launcher takes)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from npu_runtime import exitcodes
from npu_runtime.diagnose import diagnose_paths

from ._helpers import child_env, free_port

WORKER = textwrap.dedent("""
    import os, sys, time
    import torch
    import torch.distributed as dist
    import npu_runtime
    npu_runtime.install()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 4)
    fault = os.environ.get("FAULT", "")
    for step in range(10):
        loss = model(x).pow(2).mean()
        if fault == "nan" and rank == 1 and step == 4:
            loss = loss * float("nan")
        if fault == "ecc" and rank == 1 and step == 4:  # torch_npu raises this after a UCE on the device
            raise RuntimeError("synchronize:compiler_depend.ts:467 NPU function error: UCE ERROR., error code is 507053")
        time.sleep(1.5 if (fault == "stall" and rank == 1 and step == 7) else 0.1)  # a stall over the 0.5 s floor
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    print("finished", flush=True)
""")


def _job(tmp_path, fault: str):
    script = tmp_path / "train.py"
    script.write_text(WORKER)
    port = str(free_port())
    procs, logs = [], []
    for rank in range(2):
        log = tmp_path / f"rank{rank}.log"
        env = child_env(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, FAULT=fault,
                        NPU_RUNTIME_EVENTS=str(tmp_path / f"events{rank}.jsonl"),
                        NPU_RUNTIME_HEALTH_ACTION="stop", NPU_RUNTIME_WATCHDOG_TIMEOUT="8")
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, stdout=log.open("w"),
                                      stderr=subprocess.STDOUT))
        logs.append(log)
    codes = [p.wait(timeout=150) for p in procs]
    events = []
    for rank in range(2):
        path = tmp_path / f"events{rank}.jsonl"
        if path.exists():
            events += [json.loads(line) for line in path.read_text().splitlines()]
    return codes, events, [str(p) for p in logs]


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_nan_on_one_rank_stops_it_with_the_health_class_and_the_other_fails_at_the_collective(tmp_path):
    codes, events, logs = _job(tmp_path, "nan")
    assert codes[1] == exitcodes.HEALTH
    assert codes[0] != 0  # it cannot finish the next collective without rank 1
    nan = [e for e in events if e["event"] == "nan_loss"]
    assert (nan[0]["rank"], nan[0]["step"]) == (1, 4)
    diagnoses = diagnose_paths(logs)
    assert diagnoses[0].signature.id == "nan-loss" and diagnoses[0].signature.restart
    assert exitcodes.restart_helps(codes[1])


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_rank_that_stalls_is_reported_and_the_job_finishes(tmp_path):
    codes, events, _ = _job(tmp_path, "stall")
    assert codes == [0, 0]
    slow = [(e["rank"], e["step"]) for e in events if e["event"] == "slow_step"]
    assert (1, 7) in slow


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_device_fault_is_diagnosed_as_hardware_and_restartable(tmp_path):
    codes, _, logs = _job(tmp_path, "ecc")
    # The runtime classified the exception (crash_class): 77, so every launcher restarts elsewhere.
    assert codes[1] == exitcodes.HARDWARE and codes[0] != 0
    diagnoses = diagnose_paths(logs)
    assert diagnoses[0].signature.id == "hbm-ecc"
    assert diagnoses[0].file.endswith("rank1.log")
    assert diagnoses[0].signature.restart and diagnoses[0].signature.exit_class == exitcodes.HARDWARE
