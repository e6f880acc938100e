"""Watchdog: hung children die with the documented code and their stacks; steady ones live."""

import subprocess
import sys
import textwrap
import time

import pytest
from npu_runtime import WATCHDOG_EXIT_CODE, Watchdog
from npu_runtime import watchdog as wd_mod

from ._helpers import child_env

HUNG = textwrap.dedent(r"""
    import sys, threading, time, torch
    from npu_runtime import Watchdog
    wd = Watchdog(float(sys.argv[1]), dump_dir=sys.argv[2]).start()
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):                      # steps feed the watchdog via the global hook
        model(torch.randn(1, 2)).sum().backward()
        opt.step()
        time.sleep(0.05)
    print("steps done", flush=True)

    def collective_that_never_returns():
        threading.Event().wait()

    collective_that_never_returns()
""")

GIL_HOG = textwrap.dedent(r"""
    import re, sys, time
    from npu_runtime import Watchdog
    wd = Watchdog(float(sys.argv[1]), dump_dir=sys.argv[2], grace_s=0.5).start()
    for _ in range(4):                       # a few steps: the checker thread arms the backstop
        wd.beat()
        time.sleep(0.2)
    print("hogging", flush=True)
    re.match(r"(a+)+$", "a" * 64 + "b")     # catastrophic backtracking: C code holding the GIL
""")

STEADY = textwrap.dedent(r"""
    import sys, time
    from npu_runtime import Watchdog
    wd = Watchdog(float(sys.argv[1]), dump_dir=sys.argv[2]).start()
    end = time.monotonic() + 4 * float(sys.argv[1])
    while time.monotonic() < end:
        wd.beat()
        time.sleep(float(sys.argv[1]) / 5)
    with wd.paused():                        # a long save: longer than the timeout
        time.sleep(2 * float(sys.argv[1]))
    wd.beat()
    print("finished", flush=True)
""")


def _spawn(code, timeout_s, tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code, str(timeout_s), str(tmp_path)], env=child_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    return proc, time.monotonic() - t0


@pytest.mark.slow
def test_hung_child_exits_with_code_and_stacks(tmp_path):
    proc, elapsed = _spawn(HUNG, 1.0, tmp_path)
    assert proc.returncode == WATCHDOG_EXIT_CODE, proc.stderr
    assert "steps done" in proc.stdout
    assert "made no optimizer step" in proc.stderr
    assert "collective_that_never_returns" in proc.stderr  # the main thread's stack
    assert "npu_runtime-watchdog" in proc.stderr or "Thread 0x" in proc.stderr
    dumps = list(tmp_path.glob("npu_runtime-watchdog-rank*.txt"))
    assert len(dumps) == 1 and "collective_that_never_returns" in dumps[0].read_text()
    # import torch (~2-4 s) + 5 steps + timeout 1 s + check interval: well under 30 s.
    assert elapsed < 30


@pytest.mark.slow
def test_gil_holding_hang_hits_faulthandler_backstop(tmp_path):
    proc, elapsed = _spawn(GIL_HOG, 1.0, tmp_path)
    assert "hogging" in proc.stdout
    assert proc.returncode == 1, proc.stderr  # faulthandler's exit(1): documented backstop code
    assert "Timeout" in proc.stderr and "in match" in proc.stderr  # stack shows re.match
    assert elapsed < 30


@pytest.mark.slow
def test_steady_heartbeats_and_pauses_never_trigger(tmp_path):
    proc, _ = _spawn(STEADY, 0.5, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "finished" in proc.stdout
    assert not list(tmp_path.glob("npu_runtime-watchdog-*.txt"))


def test_optimizer_hook_feeds_and_stop_unhooks():
    import torch

    wd = Watchdog(60, dump_dir="/nonexistent").start()
    try:
        assert wd_mod.active() is wd and wd.last_beat is None
        p = torch.nn.Parameter(torch.ones(1))
        opt = torch.optim.SGD([p], lr=0.1)
        p.grad = torch.ones(1)
        opt.step()
        first = wd.last_beat
        assert first is not None
        opt.step()
        assert wd.last_beat >= first
    finally:
        wd.stop()
    assert wd_mod.active() is None
    wd.last_beat = None
    opt.step()
    assert wd.last_beat is None  # hook removed


def test_config_from_environment_and_validation():
    wd = Watchdog(environ={"NPU_RUNTIME_WATCHDOG_TIMEOUT": "12.5", "NPU_RUNTIME_WATCHDOG_DIR": "/x"})
    assert (wd.timeout_s, wd.dump_dir) == (12.5, "/x")
    assert Watchdog(3, environ={"NPU_RUNTIME_WATCHDOG_TIMEOUT": "12.5"}).timeout_s == 3
    assert Watchdog(environ={}).timeout_s == wd_mod.DEFAULT_TIMEOUT_S
    with pytest.raises(ValueError, match="NPU_RUNTIME_WATCHDOG_TIMEOUT"):
        Watchdog(environ={"NPU_RUNTIME_WATCHDOG_TIMEOUT": "soon"})
    with pytest.raises(ValueError):
        Watchdog(0)
    assert not wd_mod.enabled_by_env({"NPU_RUNTIME_WATCHDOG": "0"})
    assert wd_mod.enabled_by_env({})
