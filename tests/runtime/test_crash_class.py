"""A rank that dies of an exception exits with the class diagnose gives it (78 fatal,
77 hardware), so launchers stop on an OOM instead of retrying it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from npu_runtime import crash_class, exitcodes

OOM = ("NPU out of memory. Tried to allocate 2.50 GiB (NPU 0; 60.96 GiB total capacity; 57.10 GiB already "
       "allocated; 1.01 GiB free; 58.80 GiB reserved in total by PyTorch)")


@pytest.mark.parametrize(("exc", "code"), [
    (RuntimeError(OOM), exitcodes.FATAL),
    (RuntimeError("call aclnnIndexPutImpl failed, error code is 161002"), exitcodes.FATAL),
    (ImportError("libhccl.so: cannot open shared object file: No such file or directory"), exitcodes.FATAL),
    (RuntimeError("synchronize:x.ts:1 NPU function error: UCE ERROR., error code is 507053"), exitcodes.HARDWARE),
    (RuntimeError("Distributed package doesn't have NCCL built in"), exitcodes.FATAL),
])
def test_known_failures_get_their_class(exc, code):
    found = crash_class.classify(exc)
    assert found is not None and found[0] == code


@pytest.mark.parametrize("exc", [
    ValueError("bad config"), KeyboardInterrupt(), RuntimeError("EI0002: The wait execution of the Notify register "
                                                                "times out."),  # restartable, but no class
    RuntimeError("loss is nan"),  # a NaN is the health monitor's (76), not a traceback's
])
def test_other_failures_keep_exit_1(exc):
    assert crash_class.classify(exc) is None


def test_the_cause_is_found_in_a_chained_exception():
    try:
        try:
            raise RuntimeError(OOM)
        except RuntimeError as inner:
            raise ValueError("step 41 failed") from inner
    except ValueError as outer:
        found = crash_class.classify(outer)
    assert found is not None and found[0] == exitcodes.FATAL and found[1].signature.id == "npu-oom"


SCRIPT = textwrap.dedent("""
    import os, atexit
    import npu_runtime
    npu_runtime.install()
    atexit.register(lambda: print("script atexit ran", flush=True))
    raise {exc}
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("exc", "code", "said"), [
    (f"RuntimeError({OOM!r})", exitcodes.FATAL, "died of NPU out of memory [npu-oom]; exiting with 78 (fatal)"),
    ("RuntimeError('HCCS LINK ERROR.')", exitcodes.HARDWARE, "exiting with 77 (hardware)"),
    ("ValueError('no such column')", 1, None),
])
def test_an_installed_script_exits_with_the_class_after_its_traceback(tmp_path, exc, code, said):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(exc=exc))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100,
                          env={**os.environ, "NPU_RUNTIME_WATCHDOG": "0"})
    assert done.returncode == code, done.stderr
    assert "Traceback (most recent call last)" in done.stderr  # the script's own error is printed first
    assert "script atexit ran" in done.stdout  # the script's own exit handlers still run
    if said:
        assert said in done.stderr
        assert done.stderr.index("Traceback") < done.stderr.index(said)
    else:
        assert "exiting with" not in done.stderr


def test_classification_past_its_budget_is_unknown(monkeypatch, caplog):
    import threading
    import time

    release = threading.Event()
    monkeypatch.setattr(crash_class, "classify", lambda exc: release.wait(30))  # a regex that never ends
    start = time.monotonic()
    assert crash_class.classify_within(RuntimeError(OOM), budget_s=0.3) is None
    assert time.monotonic() - start < 2
    assert "left unclassified" in caplog.text
    release.set()


def test_a_huge_message_is_matched_on_a_bounded_excerpt():
    # the shape that made a signature backtrack (torch_npu and many "requires"), 1.4 MB, OOM at its end
    message = "torch_npu " + "requires torch " * 93_000 + OOM
    lines = crash_class.exception_text(RuntimeError(message))
    assert sum(len(line) for line in lines) <= crash_class.TEXT_MAX
    found = crash_class.classify(RuntimeError(message))
    assert found is not None and found[0] == exitcodes.FATAL


HUGE = textwrap.dedent("""
    import time, sys
    import npu_runtime
    npu_runtime.install()
    message = "torch_npu " + "requires torch " * 93_000 + "x"
    sys.stdout.write(f"raised {time.time()}\\n")
    sys.stdout.flush()
    raise RuntimeError(message)
""")


@pytest.mark.timeout(120)
def test_a_dying_rank_with_a_1_4_mb_message_exits_at_once(tmp_path):
    import time

    script = tmp_path / "train.py"
    script.write_text(HUGE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100,
                          env={**os.environ, "NPU_RUNTIME_WATCHDOG": "0"}, check=False)
    ended = time.time()
    raised = float(done.stdout.split()[1])
    assert done.returncode in (1, exitcodes.FATAL)  # its text reads like a version mismatch
    assert len(done.stderr) > 1_390_000  # the whole message is still printed
    # the traceback print and interpreter exit included; classification itself is bounded by 1 s
    assert ended - raised < crash_class.BUDGET_S + 2.0, ended - raised


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", ["short lines", "one line", "hostile words"])
def test_a_multi_megabyte_message_is_classified_well_within_the_budget(shape):
    """50 MB messages: 25 million short lines were split before they were cut (about 1 s,
    the whole budget, so the OOM at their end went unclassified); one line; and the first
    words of patterns repeated without their last (the shape that backtracks), each with
    the root cause at the end."""
    import time

    if shape == "short lines":
        body = "x\n" * (25 << 20)
    elif shape == "one line":
        body = "y" * (50 << 20)
    else:  # the first parts of patterns without their last (torch_npu ... requires ... but no torch)
        words = "requires is not compatible with undefined symbol device 3 link is loss exitcode : "
        body = "torch_npu " + words * ((50 << 20) // len(words))
    exc = RuntimeError(body + "\n" + OOM)
    start = time.monotonic()
    found = crash_class.classify_within(exc)
    elapsed = time.monotonic() - start
    assert found is not None and found[0] == exitcodes.FATAL and found[1].signature.id == "npu-oom", shape
    assert elapsed < crash_class.BUDGET_S, elapsed
