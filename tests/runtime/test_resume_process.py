"""Real processes: SIGKILL after a save, resume, and compare bit-for-bit; kills during
saves; a full disk; a pending async save at exit; torchrun restarting a job whose hung
rank the watchdog killed."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from npu_runtime import WATCHDOG_EXIT_CODE, CheckpointManager

from ._helpers import HERE, child_env, free_port, run_python

TOY = str(HERE / "toy_train.py")


def _run(args, env=None, check=True, nproc=None, restarts=0):
    if nproc:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               f"--max-restarts={restarts}", "--monitor-interval=0.5",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", TOY, *args]
    else:
        cmd = [sys.executable, TOY, *args]
    proc = subprocess.run(cmd, env=env or child_env(), capture_output=True, text=True, timeout=180, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _losses(prefix: Path, rank=0):
    return Path(f"{prefix}.rank{rank}").read_text().splitlines()


def _loss_by_step(prefix: Path, rank=0):
    """Step -> loss; a step run again after a restart overwrites the earlier attempt's."""
    return dict(line.split() for line in _losses(prefix, rank))


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
@pytest.mark.timeout(300)
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
@pytest.mark.timeout(300)
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
mgr.save(2, model=model, stall=Stall())
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
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
    assert not [n for n in os.listdir(tmp_path / "ck") if n.startswith(".tmp")]  # cleaned by the next save


REPEATED_SAVES = textwrap.dedent(r"""
    import sys, torch
    from npu_runtime import CheckpointManager
    model = torch.nn.Linear(512, 512)               # 1 MB of state per save
    mgr = CheckpointManager(sys.argv[1], keep=2)
    for step in range(1, 10_000):
        model.weight.data.fill_(float(step))
        mgr.save(step // 2, model=model, n=step)    # every step saved twice: re-saving is covered too
        sys.stdout.write(f"returned {step // 2} {step}\n")
        sys.stdout.flush()
""")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_at_random_moments_of_repeated_saves_loses_no_returned_save(tmp_path):
    """Whenever the kill lands, the newest checkpoint is the last one save() returned,
    or the one being saved (never an older one, never none)."""
    rng = random.Random(1234)
    for attempt in range(6):
        ck = tmp_path / f"ck{attempt}"
        proc = subprocess.Popen([sys.executable, "-c", REPEATED_SAVES, str(ck)], env=child_env(),
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().startswith("returned")  # imports done, saving
        time.sleep(rng.uniform(0.05, 1.0))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        lines = [ln.split() for ln in out.splitlines() if ln.startswith("returned")]
        last_step, last_n = (int(x) for x in lines[-1][1:]) if lines else (None, 0)
        point = CheckpointManager(ck, keep=2).load_latest()
        assert point is not None
        n = point.extra["n"]
        # The newest loadable save is the last returned one or the one in flight.
        assert n in (last_n, last_n + 1), (attempt, n, last_n, last_step)


ASYNC_AT_EXIT = textwrap.dedent(r"""
    import sys, torch
    from npu_runtime import CheckpointManager
    model = torch.nn.Linear(1024, 1024)
    handle = CheckpointManager(sys.argv[1]).async_save(1, model=model)
    print("returned", handle.done(), flush=True)
    # no wait(): normal interpreter exit completes the save
""")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pending_async_save_completes_at_interpreter_exit(tmp_path):
    proc = run_python(ASYNC_AT_EXIT, tmp_path / "ck")
    assert proc.returncode == 0, proc.stderr
    assert "returned" in proc.stdout
    mgr = CheckpointManager(tmp_path / "ck")
    assert mgr.load_latest(model=torch.nn.Linear(1024, 1024)).step == 1
    assert not [n for n in os.listdir(tmp_path / "ck") if n.startswith(".tmp")]


FILE_SIZE_LIMIT = textwrap.dedent(r"""
    import os, resource, signal, sys, torch
    from npu_runtime import CheckpointError, CheckpointManager
    mgr = CheckpointManager(sys.argv[1])
    mgr.save(1, model=torch.nn.Linear(4, 4))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # write() then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    for step in (2, 3):
        try:
            mgr.save(step, model=torch.nn.Linear(1024, 1024))
        except CheckpointError as exc:
            print("CheckpointError:", exc, flush=True)
    mgr.wait()                                           # removals run in the background
    print("left:", sorted(n for n in os.listdir(sys.argv[1]) if n != ".npu_runtime.lock"), flush=True)
""")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_real_write_failure_is_a_checkpoint_error_and_leaves_nothing_behind(tmp_path):
    proc = run_python(FILE_SIZE_LIMIT, tmp_path / "ck")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("CheckpointError: checkpoint step") == 2, proc.stdout
    assert "file-size limit" in proc.stdout and "inline_container" not in proc.stdout
    assert "left: ['latest', 'step-0000000001']" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_torchrun_restarts_a_job_whose_hung_rank_the_watchdog_killed(tmp_path, straight_two_ranks):
    """The restart loop, end to end: rank 1 hangs after step 5 (saves every 2 steps);
    its watchdog kills it with 75, torchrun restarts both ranks, they resume from step
    4, and the final parameters equal those of an uninterrupted run bit for bit."""
    straight, restarted = straight_two_ranks, tmp_path / "restarted"
    env = child_env(NPU_RUNTIME_WATCHDOG_TIMEOUT="8", NPU_RUNTIME_WATCHDOG_DIR=str(tmp_path))
    proc = _run(["--ckpt", str(tmp_path / "ck"), "--out", str(restarted), "--steps", "8", "--save-every", "2",
                 "--hang-at", "5", "--hang-rank", "1"], env=env, nproc=2, restarts=1)
    assert "rank 1 hangs after step 5" in proc.stdout
    assert "resumed at step 4" in proc.stdout
    assert f"exiting with code {WATCHDOG_EXIT_CODE}" in proc.stderr
    assert list(tmp_path.glob("npu_runtime-watchdog-rank*.txt"))
    for rank in (0, 1):
        assert _loss_by_step(restarted, rank) == _loss_by_step(straight, rank)
        assert _params_equal(straight, restarted, rank)
