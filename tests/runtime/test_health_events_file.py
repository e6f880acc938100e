"""The health events file (``NPU_RUNTIME_EVENTS``) is a side channel: whatever it points
at, producing an event returns at once, raises nothing and says at most one warning line
(issue 38 item 2). Each case runs in a fresh interpreter so that the warning is counted
on the process's real stderr; a regular file still gets every event as a whole JSON line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from ._helpers import child_env

EVENTS = 1000  # 1000 lines of about 90 bytes: more than a pipe's 64 KB buffer holds

EMIT = textwrap.dedent("""
    import errno, os, queue, stat, sys, time  # the writer's lazy imports, read before the drop below
    from npu_runtime import health

    if sys.argv[2] == "drop-root":  # root writes through any mode bits: be nobody for the write
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    monitor = health.HealthMonitor({"NPU_RUNTIME_EVENTS": sys.argv[1], "RANK": "0"}, exit=lambda code: None)
    slowest = 0.0
    for _ in range(EVENTS_COUNT):
        start = time.monotonic()
        monitor.emit("nan_loss", float("nan"), None)
        slowest = max(slowest, time.monotonic() - start)
    start = time.monotonic()
    complete = monitor.flush(5.0)
    print(f"slowest={slowest:.4f} flush={time.monotonic() - start:.4f} complete={complete} kept={len(monitor.events)}")
""").replace("EVENTS_COUNT", str(EVENTS))

HOSTILE = ["/dev/full", "fifo without reader", "fifo whose reader never reads", "directory", "dangling symlink",
           "symlink to a file", "under a read-only directory", "under a regular file"]


def _emit(target: str, drop_root: bool = False) -> tuple[dict[str, float | str], str]:
    done = subprocess.run([sys.executable, "-c", EMIT, target, "drop-root" if drop_root else "-"],
                          env=child_env(PYTHONUNBUFFERED="1"), capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    result = dict(item.split("=") for item in done.stdout.split())
    return result, done.stderr


@pytest.fixture
def scratch():
    """A directory that an unprivileged user can reach (tmp_path's parents are root's 0700
    when the tests run as root); removed afterwards."""
    path = tempfile.mkdtemp(prefix="npu-runtime-events-")
    os.chmod(path, 0o755)
    yield path
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", HOSTILE)
def test_an_unwritable_events_target_is_one_warning_and_never_a_wait(scratch, kind):
    reader = None
    drop_root = False
    target = os.path.join(scratch, "events.jsonl")
    if kind == "/dev/full":
        target = "/dev/full"
    elif kind.startswith("fifo"):
        os.mkfifo(target)
        if kind == "fifo whose reader never reads":
            reader = os.open(target, os.O_RDONLY | os.O_NONBLOCK)  # open, never read: the pipe fills
    elif kind == "directory":
        os.mkdir(target)
    elif kind == "dangling symlink":
        os.symlink(os.path.join(scratch, "nowhere", "events.jsonl"), target)
    elif kind == "symlink to a file":  # a planted link is refused, not followed
        victim = os.path.join(scratch, "victim")
        with open(victim, "w") as fh:
            fh.write("precious\n")
        os.symlink(victim, target)
    elif kind == "under a read-only directory":
        locked = os.path.join(scratch, "locked")
        os.mkdir(locked, 0o555)
        os.chmod(locked, 0o555)
        target = os.path.join(locked, "events.jsonl")
        drop_root = os.geteuid() == 0
    elif kind == "under a regular file":
        with open(os.path.join(scratch, "file"), "w"):
            pass
        target = os.path.join(scratch, "file", "events.jsonl")
    try:
        result, stderr = _emit(target, drop_root)
    finally:
        if reader is not None:
            os.close(reader)
    assert stderr.count("cannot write events to") == 1, stderr[-3000:]
    assert stderr.count("nan loss at step") == EVENTS  # every event is still logged
    assert result["kept"] == str(EVENTS)  # and kept in memory (up to health.MEMORY_MAX)
    # bounded: a hook's put never waits for the file (a loaded machine is given 0.5 s),
    # and the flush waits at most its timeout
    assert float(result["slowest"]) < 0.5, result
    assert float(result["flush"]) < 6.0, result
    if kind == "symlink to a file":
        with open(os.path.join(scratch, "victim")) as fh:
            assert fh.read() == "precious\n"
    if kind == "under a read-only directory":
        assert os.listdir(os.path.dirname(target)) == []


@pytest.mark.timeout(120)
def test_a_regular_file_gets_every_event_as_a_whole_json_line(scratch):
    target = os.path.join(scratch, "events.jsonl")
    result, stderr = _emit(target)
    assert "cannot write events to" not in stderr
    assert result["complete"] == "True"
    with open(target, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    assert lines[-1] == ""  # the file ends with a whole line
    events = [json.loads(line) for line in lines[:-1]]
    assert len(events) == EVENTS
    assert all(event["event"] == "nan_loss" and event["value"] == "nan" and event["rank"] == 0 for event in events)
    assert oct(os.stat(target).st_mode & 0o777) == oct(0o600)
