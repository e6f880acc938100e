"""Kill a hung rank quickly so the launcher restarts the job from its last checkpoint.

Cost model: every optimizer step runs a global post-hook that stores
``time.monotonic()`` in an attribute (a few hundred ns); nothing else happens on the
training thread. A daemon thread wakes a few times per timeout, and on expiry writes
every thread's stack (faulthandler) to stderr and to a file, then ``os._exit(EXIT_CODE)``.

If the training thread is stuck in C code *holding the GIL*, no Python thread can run;
for that case faulthandler's own C timer (``dump_traceback_later``) is kept armed a
grace period past the deadline by the checker thread. It dumps the stacks and exits
with status 1 (faulthandler's fixed code).

Environment (arguments win over variables):
    NPU_RUNTIME_WATCHDOG            "0"/"false"/"off" disables it in install()
    NPU_RUNTIME_WATCHDOG_TIMEOUT    seconds without a step before the rank is killed (900)
    NPU_RUNTIME_WATCHDOG_DIR        directory for the stack dump file (MA_LOG_DIR or the temp dir)
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("npu_runtime")

# EX_TEMPFAIL from BSD sysexits.h: "temporary failure, the user is invited to retry".
# It is not 1 (generic error, and faulthandler's exit code), not 2 (usage), not >=126
# (shell/signal codes), and nothing in torch, HCCL or Python exits with it, so a job
# log showing 75 says "the watchdog killed a hung rank".
EXIT_CODE = 75
DEFAULT_TIMEOUT_S = 900.0
ENV_ENABLE = "NPU_RUNTIME_WATCHDOG"
ENV_TIMEOUT = "NPU_RUNTIME_WATCHDOG_TIMEOUT"
ENV_DIR = "NPU_RUNTIME_WATCHDOG_DIR"

_monotonic = time.monotonic  # bound once: the per-step hook does one call and one store
_active: Watchdog | None = None
_active_lock = threading.Lock()


def enabled_by_env(environ: Any = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(ENV_ENABLE, "1").strip().lower() not in ("0", "false", "off", "no", "")


def active() -> Watchdog | None:
    """The started watchdog of this process, if any."""
    return _active


@contextlib.contextmanager
def paused_active() -> Iterator[None]:
    """Pause the process's watchdog (if one runs) for the duration of the block."""
    wd = _active
    if wd is None:
        yield
        return
    with wd.paused():
        yield


class Watchdog:
    """Exit with EXIT_CODE when no ``beat()`` (or optimizer step) happens for ``timeout_s``.

    The clock starts at the first beat, so imports, data loading and the first
    compilation never count, and a script that never steps an optimizer is never killed.
    Use ``with wd.paused():`` around long operations (checkpoint saves do it for you).
    """

    def __init__(self, timeout_s: float | None = None, *, dump_dir: str | None = None,
                 hook_optimizer: bool = True, grace_s: float | None = None,
                 environ: Any = None) -> None:
        environ = os.environ if environ is None else environ
        if timeout_s is None:
            raw = environ.get(ENV_TIMEOUT)
            try:
                timeout_s = float(raw) if raw else DEFAULT_TIMEOUT_S
            except ValueError:
                raise ValueError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
        if timeout_s <= 0:
            raise ValueError(f"watchdog timeout must be > 0 s, got {timeout_s}")
        self.timeout_s = float(timeout_s)
        self.grace_s = float(grace_s) if grace_s is not None else max(5.0, 0.1 * self.timeout_s)
        self.dump_dir = dump_dir or environ.get(ENV_DIR) or environ.get("MA_LOG_DIR") or tempfile.gettempdir()
        self.hook_optimizer = hook_optimizer
        self.last_beat: float | None = None  # written by beat(); the only per-step work
        self._paused = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hook_handle = None
        self.dump_path: str | None = None

    # ---------------------------------------------------------------- feeding
    def beat(self) -> None:
        self.last_beat = _monotonic()

    def _optimizer_hook(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self.last_beat = _monotonic()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            self._paused += 1
            faulthandler.cancel_dump_traceback_later()
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                if self._paused == 0 and self.last_beat is not None:
                    self.last_beat = time.monotonic()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> Watchdog:
        global _active
        if self._thread is not None:
            return self
        if self.hook_optimizer:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._hook_handle = register_optimizer_step_post_hook(self._optimizer_hook)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="npu_runtime-watchdog", daemon=True)
        self._thread.start()
        with _active_lock:
            _active = self
        return self

    def stop(self) -> None:
        global _active
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._hook_handle is not None:
            self._hook_handle.remove()
            self._hook_handle = None
        faulthandler.cancel_dump_traceback_later()
        with _active_lock:
            if _active is self:
                _active = None

    def __enter__(self) -> Watchdog:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- checker thread
    def _run(self) -> None:
        interval = min(max(self.timeout_s / 8.0, 0.05), 5.0)
        armed_until = 0.0
        while not self._stop.wait(interval):
            with self._lock:  # paused() cancels the backstop under the same lock
                last = self.last_beat
                if last is None or self._paused:
                    armed_until = 0.0
                    continue
                now = time.monotonic()
                idle = now - last
                if idle >= self.timeout_s:
                    self._expire(idle)
                    return
                # Keep the C-level backstop a grace period past our own deadline; re-arm
                # only when the deadline moved, so the cost stays off the training thread.
                deadline = last + self.timeout_s + self.grace_s
                if abs(deadline - armed_until) > interval:
                    faulthandler.dump_traceback_later(deadline - now, repeat=False, exit=True,
                                                      file=_stderr_fd())
                    armed_until = deadline

    def _expire(self, idle: float) -> None:
        faulthandler.cancel_dump_traceback_later()
        rank = os.environ.get("RANK", "?")
        header = (f"\nnpu_runtime watchdog: rank {rank} pid {os.getpid()} made no optimizer step or beat() "
                  f"for {idle:.1f} s (timeout {self.timeout_s:g} s); dumping all thread stacks and exiting "
                  f"with code {EXIT_CODE}\n")
        err = _stderr_fd()
        with contextlib.suppress(Exception):
            os.write(err, header.encode())
            faulthandler.dump_traceback(file=err, all_threads=True)
        with contextlib.suppress(Exception):
            os.makedirs(self.dump_dir, exist_ok=True)
            path = os.path.join(self.dump_dir, f"npu_runtime-watchdog-rank{rank}-pid{os.getpid()}.txt")
            with open(path, "w") as fh:
                fh.write(header)
                fh.flush()
                faulthandler.dump_traceback(file=fh, all_threads=True)
            self.dump_path = path
            os.write(err, f"npu_runtime watchdog: stacks written to {path}\n".encode())
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(EXIT_CODE)


def _stderr_fd() -> int:
    for stream in (sys.stderr, sys.__stderr__):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # replaced/closed streams
            return stream.fileno()  # type: ignore[union-attr]
    return 2
