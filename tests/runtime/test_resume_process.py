"""Real processes: SIGKILL after a save, resume, and compare bit-for-bit; kill mid-save."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from npu_runtime import CheckpointManager

from ._helpers import HERE, child_env, free_port

TOY = str(HERE / "toy_train.py")


def _run(args, env=None, check=True, nproc=None):
    if nproc:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", TOY, *args]
    else:
        cmd = [sys.executable, TOY, *args]
    proc = subprocess.run(cmd, env=env or child_env(), capture_output=True, text=True, timeout=180, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _losses(prefix: Path, rank=0):
    return Path(f"{prefix}.rank{rank}").read_text().splitlines()


def _params_equal(a: Path, b: Path, rank=0):
    pa = torch.load(f"{a}.rank{rank}.params.pt", weights_only=True)
    pb = torch.load(f"{b}.rank{rank}.params.pt", weights_only=True)
    return pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
    """One uninterrupted 15-step run, shared by the single-process resume cases."""
    d = tmp_path_factory.mktemp("straight")
    _run(["--ckpt", str(d / "ck"), "--out", str(d / "straight"), "--steps", "15"])
    return d / "straight"


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [8, 12])  # 8: mid-epoch (batch 2 of 6); 12: on an epoch boundary
def test_sigkill_and_resume_is_bit_identical(tmp_path, kill_at, straight_run):
    straight, resumed = straight_run, tmp_path / "resumed"
    killed = _run(["--ckpt", str(tmp_path / "b"), "--out", str(resumed), "--steps", "15",
                   "--save-at", str(kill_at), "--kill-at", str(kill_at)], check=False)
    assert killed.returncode == -signal.SIGKILL
    assert len(_losses(resumed)) == kill_at
    again = _run(["--ckpt", str(tmp_path / "b"), "--out", str(resumed), "--steps", "15"])
    assert f"resumed at step {kill_at}" in again.stdout
    assert _losses(resumed) == _losses(straight)
    assert _params_equal(straight, resumed)


@pytest.fixture(scope="module")
def straight_two_ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("straight2")
    _run(["--ckpt", str(d / "ck"), "--out", str(d / "straight"), "--steps", "8"], nproc=2)
    return d / "straight"


@pytest.mark.slow
@pytest.mark.parametrize("sharded", [False, True], ids=["rank0-writes", "dcp-sharded"])
def test_two_rank_ddp_sigkill_and_resume_is_bit_identical(tmp_path, straight_two_ranks, sharded):
    straight, resumed = straight_two_ranks, tmp_path / "resumed"
    flag = ["--sharded"] if sharded else []
    # 24 samples over 2 ranks, batch 4: 3 batches per epoch; kill mid-epoch at step 5.
    killed = _run(["--ckpt", str(tmp_path / "b"), "--out", str(resumed), "--steps", "8",
                   "--save-at", "5", "--kill-at", "5", *flag], nproc=2, check=False)
    assert killed.returncode != 0
    _run(["--ckpt", str(tmp_path / "b"), "--out", str(resumed), "--steps", "8", *flag], nproc=2)
    for rank in (0, 1):
        assert _losses(resumed, rank) == _losses(straight, rank)
        assert _params_equal(straight, resumed, rank)
    ckpt = tmp_path / "b" / "step-0000000005"
    # Each rank's own RNG went into the checkpoint.
    payload = torch.load(ckpt / "state.pt", weights_only=True)
    assert payload["world_size"] == 2 and len(payload["rng"]) == 2
    assert (ckpt / "sharded" / ".metadata").exists() == sharded
    assert ("model" in payload["states"]) != sharded


CRASH_CHILD = r"""
import os, sys, time, torch
from npu_runtime import CheckpointManager

class Stall:
    # Pickled inside torch.save: signal the parent, then hang mid-write.
    def __reduce__(self):
        open(sys.argv[2], "w").close()
        time.sleep(120)
        return (int, (0,))

model = torch.nn.Linear(256, 256)
mgr = CheckpointManager(sys.argv[1], keep=3)
mgr.save(1, model=model)
mgr.wait()
mgr.save(2, model=model, stall=Stall())
"""


@pytest.mark.slow
def test_sigkill_during_save_keeps_previous_checkpoint(tmp_path):
    marker = tmp_path / "in-save"
    proc = subprocess.Popen([sys.executable, "-c", CRASH_CHILD, str(tmp_path / "ck"), str(marker)],
                            env=child_env())
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, "child exited before reaching the save"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    left = os.listdir(tmp_path / "ck")
    assert any(n.startswith(".tmp-step-0000000002") for n in left), left  # the half-written save
    mgr = CheckpointManager(tmp_path / "ck", keep=3)
    model = torch.nn.Linear(256, 256)
    assert mgr.load_latest(model=model).step == 1
    assert mgr.latest_pointer() == "step-0000000001"
    mgr.save(3, model=model)
    mgr.wait()
    assert not [n for n in os.listdir(tmp_path / "ck") if n.startswith(".tmp")]  # cleaned by the next save
