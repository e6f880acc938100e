"""A finished job never hangs at exit (exitguard.py): once the training is over (the script
returned, or destroy_process_group() returned), a rank that does not exit within
NPU_RUNTIME_EXIT_TIMEOUT is ended with exit 0 and the hang is an ``exit_hang`` event; a rank
that died of an exception is left alone."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time

import pytest
from npu_runtime import exitguard

from ._helpers import child_env, run_script

HANG_AT_EXIT = textwrap.dedent(r"""
    import atexit, os, re, sys, threading, time
    import torch
    from torch.distributed import destroy_process_group  # bound before install(), as pytorch/examples do
    import npu_runtime
    npu_runtime.install()
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
    how = sys.argv[1]
    if how == "gil":        # finalisation stuck in C code that holds the GIL (~ProcessGroupGloo under ~Reducer)
        atexit.register(lambda: re.match(r"(a+)+$", "a" * 64 + "b"))
    elif how == "wait":     # an exit handler waiting for a thread that never comes
        atexit.register(threading.Event().wait)
    elif how == "destroy":  # the script tore its group down, then hangs
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
        dist.destroy_process_group()
        threading.Event().wait()
    elif how.startswith("destroy-imported"):  # the name bound before install(), then a hang
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
        destroy_process_group()
        print(f"trained {time.time()}", flush=True)
        if how.endswith("gil"):
            re.match(r"(a+)+$", "a" * 64 + "b")
        time.sleep(3600)
    elif how == "beat":     # work after destroy that says it is alive is not cut short
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
        dist.destroy_process_group()
        for _ in range(10):
            time.sleep(0.5)
            npu_runtime.beat()
        torch.save(model.state_dict(), "after.pt")
        print("still working", flush=True)
        threading.Event().wait()
    elif how == "worker":   # a worker hung holding the GIL, which the exit joins
        import multiprocessing as mp
        def hog(path):
            with open(path, "w") as fh:
                fh.write(str(os.getpid()))
            re.match(r"(a+)+$", "a" * 64 + "b")
        mp.get_context("fork").Process(target=hog, args=("worker.pid",)).start()
        while not os.path.exists("worker.pid"):
            time.sleep(0.05)
    elif how == "exit3":    # the script says it failed, then an exit handler hangs
        atexit.register(threading.Event().wait)
        print(f"trained {time.time()}", flush=True)
        sys.exit(3)
    elif how == "exit3-gil":  # the same, the hang holding the GIL: the C timer ends it
        atexit.register(lambda: re.match(r"(a+)+$", "a" * 64 + "b"))
        print(f"trained {time.time()}", flush=True)
        sys.exit(3)
    elif how == "destroy-exit3":  # armed at destroy (the C timer made then), sys.exit(3) after
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
        dist.destroy_process_group()
        atexit.register(lambda: re.match(r"(a+)+$", "a" * 64 + "b"))
        print(f"trained {time.time()}", flush=True)
        sys.exit(3)
    elif how == "crash":    # died of an exception: not a finished job
        atexit.register(threading.Event().wait)
        raise ValueError("bad batch")
    print(f"trained {time.time()}", flush=True)
""")


def _run(tmp_path, how, timeout=60, **env):
    from ._helpers import free_port

    environ = child_env(**{"NPU_RUNTIME_EXIT_TIMEOUT": "2", "NPU_RUNTIME_EVENTS": str(tmp_path / "events.jsonl"),
                           **env})
    start = time.monotonic()
    proc = run_script(tmp_path, HANG_AT_EXIT, how, str(free_port()), env=environ, timeout=timeout)
    ended = time.time()
    trained = proc.stdout.split("trained ")[1].split()[0] if "trained " in proc.stdout else None
    return proc, (ended - float(trained)) if trained else time.monotonic() - start


def _events(tmp_path):
    path = tmp_path / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.timeout(90)
def test_an_exit_handler_that_never_returns_is_ended_with_0_and_reported(tmp_path):
    proc, took = _run(tmp_path, "wait")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert took < 2 + 5, took  # the Python guard: the timeout and one check interval, on a loaded machine
    assert "trained" in proc.stdout
    assert "the training is over (the script returned)" in proc.stderr
    assert [e["event"] for e in _events(tmp_path)] == ["exit_hang"]


@pytest.mark.timeout(90)
def test_a_hang_holding_the_gil_is_ended_by_the_c_timer(tmp_path):
    proc, took = _run(tmp_path, "gil")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained" in proc.stdout
    # no Python runs: the C timer ends it timeout + GRACE_S after the guard was armed
    assert took < 2 + exitguard.GRACE_S + 5, took  # + the exit handlers before it, on a loaded machine


@pytest.mark.timeout(90)
def test_after_destroy_process_group_a_hang_is_ended_with_0(tmp_path):
    proc, _ = _run(tmp_path, "destroy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "destroy_process_group() returned" in proc.stderr


@pytest.mark.timeout(90)
@pytest.mark.parametrize("hang", ["sleep", "gil"])
def test_destroy_process_group_imported_before_install_arms_the_guard(tmp_path, hang):
    """Issue 38.6, measured on the emulator: pytorch/examples' multigpu.py binds
    ``from torch.distributed import destroy_process_group`` at the top, before
    ``install()`` patches the module attribute; a rank that then slept, or hung holding
    the GIL, after ``destroy_process_group()`` was never ended (150 s, both hangs)."""
    how = "destroy-imported" + ("-gil" if hang == "gil" else "")
    proc, took = _run(tmp_path, how, timeout=30)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the Python guard (sleep) or the C timer GRACE_S later (gil), on a loaded machine
    assert took < 2 + exitguard.GRACE_S + 5, took
    if hang == "sleep":
        assert "the training is over (destroy_process_group() returned)" in proc.stderr
        assert [e["event"] for e in _events(tmp_path)] == ["exit_hang"]


@pytest.mark.timeout(90)
def test_work_after_destroy_that_beats_is_not_cut_short(tmp_path):
    proc, _ = _run(tmp_path, "beat", NPU_RUNTIME_WATCHDOG="0")  # beat() reaches the guard without a watchdog
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "still working" in proc.stdout  # 5 s of work under a 2 s exit timeout
    assert "the training is over (destroy_process_group() returned)" in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_rank_that_died_of_an_exception_is_not_ended_with_0(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):  # it hangs as it would without the runtime
        _run(tmp_path, "crash", timeout=18, NPU_RUNTIME_WATCHDOG="0")


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_the_guard_can_be_switched_off(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        _run(tmp_path, "wait", timeout=18, NPU_RUNTIME_EXIT_TIMEOUT="0", NPU_RUNTIME_WATCHDOG="0")


def test_bad_timeouts_fall_back_to_the_default(caplog):
    assert exitguard.timeout_from_env({"NPU_RUNTIME_EXIT_TIMEOUT": "soon"}) == exitguard.DEFAULT_TIMEOUT_S
    assert exitguard.timeout_from_env({"NPU_RUNTIME_EXIT_TIMEOUT": "1e400"}) == exitguard.DEFAULT_TIMEOUT_S
    assert exitguard.timeout_from_env({"NPU_RUNTIME_EXIT_TIMEOUT": "0"}) == 0
    assert exitguard.timeout_from_env({}) == exitguard.DEFAULT_TIMEOUT_S
    assert "NPU_RUNTIME_EXIT_TIMEOUT" in caplog.text


@pytest.mark.timeout(90)
def test_a_worker_the_exit_waits_for_is_ended_with_the_rank(tmp_path):
    """Round 4 follow-up: a forked worker hung holding the GIL after the parent trained,
    joined by multiprocessing at exit: the guard ended the rank with 0 before the worker's
    heartbeat budget (the step timeout) ran out, and the worker spun on, orphaned."""
    import os

    from ._helpers import alive

    pid_file = tmp_path / "worker.pid"
    try:  # before the fix, the orphan kept the output pipes open: run() timed out
        proc, took = _run(tmp_path, "worker", timeout=30)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert took < 2 + 8, took  # the timeout, one check interval, the kill; on a loaded machine
        assert "the training is over (the script returned)" in proc.stderr
        assert not alive(int(pid_file.read_text()))
    finally:  # never leave a spinning worker behind
        if pid_file.exists() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), 9)


SPAWN_HANG_AFTER_DESTROY = textwrap.dedent(r"""
    import os, re, sys, time
    import torch
    import torch.multiprocessing as mp
    from torch.distributed import init_process_group, destroy_process_group
    import npu_runtime

    def worker(rank, port, hang):
        init_process_group("gloo", init_method="tcp://127.0.0.1:" + port, rank=rank, world_size=2)
        destroy_process_group()
        # one write a line: both ranks share the pipe, and print() writes the text and its end apart
        sys.stdout.write(f"trained {time.time()}\n")
        sys.stdout.flush()
        if rank == 1:  # mp.spawn sets no RANK: the exit_hang event must still say rank 1
            if hang == "gil":
                re.match(r"(a+)+$", "a" * 64 + "b")
            time.sleep(3600)

    if __name__ == "__main__":
        npu_runtime.install()
        mp.spawn(worker, args=(sys.argv[1], sys.argv[2]), nprocs=2)
""")


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("hang", ["sleep", "gil"])
def test_an_mp_spawn_worker_hung_after_destroy_is_ended_with_0(tmp_path, hang):
    """Issue 38.6 on the emulator: a two-rank mp.spawn job (pytorch/examples' multigpu.py
    with a hang after ``destroy_process_group()``) ran on for 150 s. The spawn worker
    re-imports the main module through runpy, whose functions keep the namespace runpy
    copied the module from: re-pointing the module's name alone did not reach them. Its
    ``exit_hang`` event said rank 0 (``RANK`` is unset under mp.spawn) for rank 1."""
    from ._helpers import free_port

    # the watchdog ends a worker the guard misses (30 s, exit 75 or 1): nothing is left behind
    environ = child_env(NPU_RUNTIME_EXIT_TIMEOUT="2", NPU_RUNTIME_WATCHDOG_TIMEOUT="30",
                        NPU_RUNTIME_EVENTS=str(tmp_path / "events.jsonl"))
    proc = run_script(tmp_path, SPAWN_HANG_AFTER_DESTROY, str(free_port()), hang, env=environ, timeout=100)
    ended = time.time()
    assert proc.returncode == 0, proc.stderr[-3000:]
    took = ended - max(float(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("trained "))
    assert took < 2 + exitguard.GRACE_S + 8, took  # + the spawn parent's exit, on a loaded machine
    if hang == "sleep":
        assert "the training is over (destroy_process_group() returned)" in proc.stderr
        assert [(e["event"], e["rank"]) for e in _events(tmp_path)] == [("exit_hang", 1)]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["exit3", "exit3-gil", "destroy-exit3"])
def test_a_hang_after_sys_exit_n_ends_with_n_not_0(tmp_path, how):
    """Held-out round of issue 38: a script that called sys.exit(3) (it failed) and then hung
    on its way out was ended with exit 0, a failed job reported to the launcher as finished."""
    proc, _took = _run(tmp_path, how)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "trained" in proc.stdout
