"""Faults injected into a real ``npu-migrate`` process, for tests that need a real
process and real signals.

:func:`faulty_env` writes a ``sitecustomize.py`` (Python imports it at start-up,
in the CLI process and in every worker, whatever the start method) that, for a
source file containing a marker word, makes the parser misbehave:

* ``crash-the-parser``: a real segmentation fault (reading address 0), as a
  native crash in libcst's Rust parser would be;
* ``hang-the-parser``: the parse blocks forever, after writing the worker's pid
  to ``$NPU_TEST_STATE/parsing``.

``NPU_TEST_SLOW_WRITE=N`` makes the N-th ``--write`` hang in ``os.fsync`` (after
writing ``$NPU_TEST_STATE/writing``), while its temp file is half done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SITECUSTOMIZE = '''
import os, time

_state = os.environ.get("NPU_TEST_STATE")


def _mark(name):
    with open(os.path.join(_state, name + ".tmp"), "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(os.path.join(_state, name + ".tmp"), os.path.join(_state, name))


def _parse_hook():
    import ctypes
    import libcst

    real = libcst.parse_module

    def parse_module(source, *args, **kwargs):
        data = source if isinstance(source, bytes) else source.encode("utf-8", "surrogateescape")
        if b"crash-the-parser" in data:
            ctypes.string_at(0)
        if b"hang-the-parser" in data:
            _mark("parsing")
            while True:
                time.sleep(3600)
        return real(source, *args, **kwargs)

    libcst.parse_module = parse_module


def _write_hook(n):
    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == n:
            _mark("writing")
            while True:
                time.sleep(3600)
        return real(fd)

    os.fsync = fsync


if _state:
    _parse_hook()
    if os.environ.get("NPU_TEST_SLOW_WRITE"):
        _write_hook(int(os.environ["NPU_TEST_SLOW_WRITE"]))
'''

#: The console script installed next to the interpreter running the tests (a venv's bin/).
CONSOLE_SCRIPT = Path(sys.executable).parent / "npu-migrate"


def faulty_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")])),
               NPU_TEST_STATE=str(state), **extra)
    env.pop("NPU_MIGRATE_CMD", None)
    return env


def start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``npu-migrate ARGS`` in its own session (so that the test can signal its whole process group)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # a background job: the child would ignore Ctrl-C
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return subprocess.Popen([str(CONSOLE_SCRIPT), *args], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 120.0) -> int:
    """The pid written to ``path`` once it exists (fails if ``process`` ends first)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, process.communicate(timeout=10)
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead, only not reaped yet
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def wait_gone(pid: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_group(process: subprocess.Popen) -> None:
    """Clean-up after a failed test: nothing of the run survives it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
