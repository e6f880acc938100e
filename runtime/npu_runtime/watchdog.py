"""Kill a hung rank quickly so the launcher restarts the job from its last checkpoint.

**Signs of life** (``feeds.py``): optimizer steps, first-time module imports,
data-loader batches, module forwards (a one-shot hook the checker arms after a quiet
check interval), the runtime's own checkpoint writes, and ``beat()``. A process waiting to
join its ``multiprocessing`` / ``torch.multiprocessing.spawn`` workers is alive too:
each worker has a watchdog of its own.

**The clock starts at ``start()``**, so a rank hung before its first step (the
rendezvous, the first collective, DDP's first bucket sync) is caught as well, but
within the **first-step timeout**: until the first optimizer step completes (or
:func:`warmed_up` is called, for loops without an optimizer), a rank may be silent for
``first_step_timeout_s`` (``NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT``; default the
larger of the step timeout and 1800 s). A first step compiles (``torch.compile``, graph
mode), autotunes and warms data loaders up, silently and for minutes; that is not a
hang. After the first step the step timeout applies.

**Timeouts are clamped** to :data:`MAX_TIMEOUT_S` (about 31 years): larger values (1e10,
1e300) are "never" and must not overflow ``threading``/``faulthandler``.

**On expiry** a daemon thread writes every thread's stack (faulthandler) to stderr and
to a file, SIGKILLs the process's descendants (hung data-loader workers must not be
orphaned), then ``os._exit(EXIT_CODE)``. If the training thread is stuck in C code
*holding the GIL*, no Python thread can run; for that, faulthandler's own C timer
(``dump_traceback_later``) is kept armed a grace period past the deadline. It dumps
the stacks and exits with status 1 (faulthandler's fixed code).

**Default timeout**: ``HCCL_EXEC_TIMEOUT`` + 60 s (1896 s with HCCL's default 1836 s).
A rank that waits in a collective for a slow peer is healthy until HCCL itself gives
up on that collective; killing it earlier would kill healthy ranks, and HCCL's own
error (which operation, which rank) is the better diagnosis when it comes first.

Environment (arguments win over variables):
    NPU_RUNTIME_WATCHDOG            "0"/"false"/"off"/"no" disables it in install()
    NPU_RUNTIME_WATCHDOG_TIMEOUT    seconds without a sign of life before the rank is killed
    NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT  the same before the first optimizer step
    NPU_RUNTIME_WATCHDOG_DIR        directory for the stack dump file (MA_LOG_DIR, else a new
                                    private directory under the temp dir); the file is
                                    created with O_EXCL|O_NOFOLLOW, mode 0600
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
from collections.abc import Iterator, Mapping
from typing import Any

from . import exitcodes
from . import exitguard as _exitguard
from .errors import LaunchError
from .feeds import Feeds

log = logging.getLogger("npu_runtime")

# EX_TEMPFAIL from BSD sysexits.h: "temporary failure, the user is invited to retry".
# It is not 1 (generic error, and faulthandler's exit code), not 2 (usage), not >=126
# (shell/signal codes), and nothing in torch, HCCL or Python exits with it, so a job
# log showing 75 says "the watchdog killed a hung rank".
EXIT_CODE = exitcodes.HANG
HCCL_EXEC_TIMEOUT_DEFAULT_S = 1836  # HCCL's own default
MARGIN_OVER_HCCL_S = 60.0
ENV_ENABLE = "NPU_RUNTIME_WATCHDOG"
ENV_TIMEOUT = "NPU_RUNTIME_WATCHDOG_TIMEOUT"
ENV_DIR = "NPU_RUNTIME_WATCHDOG_DIR"
ENV_FIRST_STEP = "NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT"
FIRST_STEP_DEFAULT_S = 1800.0
#: every timeout is clamped to this: faulthandler's timer overflows time_t near 1e10 s
MAX_TIMEOUT_S = 1e9

_monotonic = time.monotonic
_active: Watchdog | None = None
_active_lock = threading.Lock()


def enabled_by_env(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(ENV_ENABLE, "1").strip().lower() not in ("0", "false", "off", "no", "")


def default_timeout_s(environ: Mapping[str, str] | None = None) -> float:
    """``HCCL_EXEC_TIMEOUT`` + 60 s; HCCL's default (1836 s) when it is unset, 0 ("no
    limit") or not a number."""
    environ = os.environ if environ is None else environ
    from .bounds import BoundError, bounded_int

    try:
        exec_s = bounded_int(environ.get("HCCL_EXEC_TIMEOUT"), "HCCL_EXEC_TIMEOUT", minimum=0)
    except BoundError:
        exec_s = None
    return clamp((exec_s or HCCL_EXEC_TIMEOUT_DEFAULT_S) + MARGIN_OVER_HCCL_S)


def _seconds_from_env(environ: Mapping[str, str], name: str) -> float | None:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    if len(raw) > 64:
        raise LaunchError(f"{name}={raw[:20]!r}... ({len(raw)} characters) is not a number of seconds")
    try:
        value = float(raw)
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise LaunchError(f"{name}={raw!r} must be a positive number of seconds")
    return clamp(value)


def clamp(seconds: float) -> float:
    """A timeout that ``threading`` and ``faulthandler`` accept (at most MAX_TIMEOUT_S)."""
    return min(float(seconds), MAX_TIMEOUT_S)


def timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``NPU_RUNTIME_WATCHDOG_TIMEOUT`` if set, else :func:`default_timeout_s`.
    Raises LaunchError naming the variable when the value is not a positive number."""
    environ = os.environ if environ is None else environ
    value = _seconds_from_env(environ, ENV_TIMEOUT)
    return default_timeout_s(environ) if value is None else value


def first_step_timeout_from_env(timeout_s: float, environ: Mapping[str, str] | None = None) -> float:
    """``NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT`` if set, else the larger of
    ``timeout_s`` and FIRST_STEP_DEFAULT_S. LaunchError naming the variable if bad."""
    environ = os.environ if environ is None else environ
    value = _seconds_from_env(environ, ENV_FIRST_STEP)
    return max(timeout_s, FIRST_STEP_DEFAULT_S) if value is None else value


def active() -> Watchdog | None:
    """The started watchdog of this process, if any."""
    return _active


def beat() -> None:
    """Feed this process's watchdog, if one runs (a sign of life from anywhere), and the
    exit guard once the training is over."""
    wd = _active
    if wd is not None:
        wd.last_beat = _monotonic()
    _exitguard.note_life()


def warmed_up() -> None:
    """End the first-step phase now (the step timeout applies from here), for loops
    whose steps are not optimizer steps the watchdog sees. A sign of life too."""
    wd = _active
    if wd is not None:
        wd.last_step = _monotonic()


@contextlib.contextmanager
def paused_active() -> Iterator[None]:
    """Pause the process's watchdog (if one runs) for the duration of the block."""
    wd = _active
    if wd is None:
        yield
        return
    with wd.paused():
        yield


# ----------------------------------------------------------------------------- backstop
# faulthandler's timer thread does not survive fork(), but its state does: in a forked
# child, cancelling or re-arming a timer the parent had armed waits forever for that
# thread. Only the process that armed it touches it.
_backstop_pid: int | None = None


def _arm_backstop(seconds: float) -> None:
    global _backstop_pid
    if _backstop_pid not in (None, os.getpid()):
        return
    faulthandler.dump_traceback_later(max(seconds, 0.001), repeat=False, exit=True, file=_stderr_fd())
    _backstop_pid = os.getpid()


def _cancel_backstop() -> None:
    if _backstop_pid == os.getpid():
        faulthandler.cancel_dump_traceback_later()


def _join_codes() -> set:
    """Code objects of the calls in which a process waits for its worker processes."""
    codes = set()
    with contextlib.suppress(Exception):
        import multiprocessing.process

        codes.add(multiprocessing.process.BaseProcess.join.__code__)
    torch_spawn = sys.modules.get("torch.multiprocessing.spawn")
    if torch_spawn is not None:
        with contextlib.suppress(Exception):
            codes.add(torch_spawn.ProcessContext.join.__code__)
    return codes


class Watchdog:
    """Exit with EXIT_CODE when no sign of life comes for ``timeout_s``.

    Signs of life: optimizer steps, module forwards and data-loader batches (see
    ``feeds.py``), the runtime's checkpoint writes and ``beat()``. The clock starts at
    ``start()``. ``with wd.paused():`` stops it around an operation known to be long
    and silent (prefer ``beat()`` from inside it).
    """

    def __init__(self, timeout_s: float | None = None, *, dump_dir: str | None = None,
                 hook_optimizer: bool = True, watch_forwards: bool = True, grace_s: float | None = None,
                 first_step_timeout_s: float | None = None, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        if timeout_s is None:
            timeout_s = timeout_from_env(environ)
        if not timeout_s > 0:
            raise ValueError(f"watchdog timeout must be > 0 s, got {timeout_s}")
        self.timeout_s = clamp(timeout_s)
        if first_step_timeout_s is None:
            first_step_timeout_s = first_step_timeout_from_env(self.timeout_s, environ)
        if not first_step_timeout_s > 0:
            raise ValueError(f"first-step timeout must be > 0 s, got {first_step_timeout_s}")
        self.first_step_timeout_s = clamp(first_step_timeout_s)
        self.grace_s = clamp(grace_s if grace_s is not None else max(5.0, 0.1 * self.timeout_s))
        #: None: a new private directory is made for the dump when it is written
        self.dump_dir = dump_dir or environ.get(ENV_DIR) or environ.get("MA_LOG_DIR") or None
        self.hook_optimizer = hook_optimizer
        self.watch_forwards = watch_forwards
        # Written by the feeds (one store each); read by the checker thread.
        self.last_beat: float | None = None
        self.last_step: float | None = None
        self.started_at: float | None = None
        self.interval_s = min(max(self.timeout_s / 8.0, 0.05), 5.0)
        self._paused = 0
        self._exiting = False
        self._expiring = threading.Event()
        self._killed = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner_ident: int | None = None
        self._pid: int | None = None
        self._feeds = Feeds(self)
        self.dump_path: str | None = None

    # ---------------------------------------------------------------- feeding
    def beat(self) -> None:
        self.last_beat = _monotonic()

    def last_sign_of_life(self) -> float:
        """Monotonic time of the latest beat, step or start."""
        return max(t for t in (self.started_at, self.last_beat, self.last_step) if t is not None)

    def current_timeout(self) -> float:
        """The first-step timeout until an optimizer step completed, then the step timeout;
        while the interpreter exits, the larger of the two."""
        if self._exiting or _exitguard.armed():  # the exit guard watches a finished job's way out
            return max(self.first_step_timeout_s, self.timeout_s)
        return self.first_step_timeout_s if self.last_step is None else self.timeout_s

    def _at_exit(self) -> None:
        """The interpreter is exiting: its atexit handlers (compile worker pools, process
        group teardown) run silently, like a first step; still watched, not on the step
        clock."""
        if self._expiring.is_set():
            # The checker is killing this process (its dying workers may have made the main
            # thread raise, e.g. DataLoader's SIGCHLD check): end as the watchdog would.
            self._killed.wait(10)
            with contextlib.suppress(Exception):  # atexit does not run past os._exit
                from . import own_dirs

                own_dirs.remove_before_exit()
            os._exit(EXIT_CODE)
        self._exiting = True
        self.last_beat = _monotonic()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            self._paused += 1
            _cancel_backstop()
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1
                self.last_beat = _monotonic()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> Watchdog:
        """Start watching. A process has one active watchdog: starting this one stops
        the previous one (for example the one ``install()`` started)."""
        global _active
        if self._thread is not None:
            return self
        with _active_lock:
            previous = _active
        if previous is not None and previous is not self:
            log.info("npu_runtime: a new Watchdog (timeout %g s) replaces the active one", self.timeout_s)
            previous.stop()
        if self.hook_optimizer:
            self._feeds.hook_steps()
        self._feeds.hook_imports()
        if self.watch_forwards:
            self._feeds.hook_batches()
        from . import descendants

        descendants.become_subreaper()  # orphaned helpers stay in the tree the watchdog kills
        self._stop.clear()
        self.started_at = _monotonic()
        self._owner_ident = threading.get_ident()
        self._pid = os.getpid()
        from . import heartbeat

        # The heartbeat file is made here, by the thread that starts the watchdog, not by the
        # checker thread: a worker whose code takes the GIL at once (a regex, a C loop) kept
        # the new thread from ever running, so no file told the parent it existed and the
        # parent's join() counted as waiting for a live worker, for ever (round 5).
        self._beacon = heartbeat.Beacon(self.timeout_s + self.grace_s, self.interval_s)
        self._thread = threading.Thread(target=self._run, name="npu_runtime-watchdog", daemon=True)
        self._thread.start()
        register = getattr(threading, "_register_atexit", None)  # runs before atexit handlers
        if register is not None:
            with contextlib.suppress(RuntimeError):
                register(self._at_exit)
        with _active_lock:
            _active = self
        _exitguard.watch_life(self.last_sign_of_life)
        return self

    def stop(self) -> None:
        global _active
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and self._pid == os.getpid() and thread is not threading.current_thread():
            thread.join()
        self._feeds.remove()
        if self._pid == os.getpid():
            _cancel_backstop()
        with _active_lock:
            if _active is self:
                _active = None

    def forget_after_fork(self) -> None:
        """In a forked child: this object's thread did not survive; drop its hooks."""
        global _active
        self._lock = threading.Lock()  # its checker thread may have held it at fork()
        self._stop.set()
        self._thread = None
        self._feeds.forget_inherited()
        with _active_lock:
            if _active is self:
                _active = None

    def __enter__(self) -> Watchdog:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- checker thread
    def _run(self) -> None:
        from . import heartbeat

        armed_until = 0.0
        # The heartbeat says "this checker thread can run", not "training progresses": a
        # thread that could not run for a whole step timeout is stuck behind the GIL, also
        # during a first step (compiling runs Python, so this thread runs too). So its budget
        # is the step timeout, never the long first-step one: a worker forked after the parent
        # warmed up would otherwise be caught only after NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT.
        beacon = getattr(self, "_beacon", None) or heartbeat.Beacon(self.timeout_s + self.grace_s, self.interval_s)
        try:
            self._check_loop(armed_until, beacon)
        finally:
            beacon.remove()

    def _check_loop(self, armed_until: float, beacon: Any) -> None:
        from . import heartbeat

        while not self._stop.wait(self.interval_s):
            beacon.touch()  # "this worker's watchdog runs" (heartbeat.py)
            with contextlib.suppress(Exception):
                heartbeat.check_workers()
            with self._lock:  # paused() cancels the backstop under the same lock
                if self._paused:
                    armed_until = 0.0
                    continue
                now = _monotonic()
                last = self.last_sign_of_life()
                if self.watch_forwards and now - last >= self.interval_s:
                    self._feeds.arm_forward()  # quiet for a whole interval: the next forward counts
                idle = now - last
                timeout = self.current_timeout()
                if idle >= timeout:
                    if self._waiting_for_workers():
                        self.last_beat = now
                        continue
                    self._expire(idle, timeout)
                    return
                # Keep the C-level backstop a grace period past our own deadline; re-arm
                # only when the deadline moved, so the cost stays off the training thread.
                deadline = last + timeout + self.grace_s
                if abs(deadline - armed_until) > self.interval_s:
                    if deadline - now <= MAX_TIMEOUT_S:
                        _arm_backstop(deadline - now)
                    else:  # "never" for now; armed once the deadline comes within reach
                        _cancel_backstop()
                    armed_until = deadline

    def _waiting_for_workers(self) -> bool:
        """Is the owner thread joining worker processes (each of which has a watchdog)?"""
        frame = sys._current_frames().get(self._owner_ident)  # type: ignore[arg-type]
        codes = _join_codes()
        while frame is not None:
            if frame.f_code in codes:
                return True
            frame = frame.f_back
        return False

    def _expire(self, idle: float, timeout: float) -> None:
        from . import descendants

        self._expiring.set()
        _cancel_backstop()
        # a job that install() found to be a single process exports no RANK: it is rank 0
        rank = os.environ.get("RANK") or ("0" if os.environ.get("WORLD_SIZE", "1") == "1" else "unknown")
        children = descendants.descendants()
        header = (f"\nnpu_runtime watchdog: rank {rank} pid {os.getpid()} showed no sign of life (optimizer step, "
                  f"import, forward, data-loader batch, checkpoint write or beat()) for {idle:.1f} s (timeout "
                  f"{timeout:g} s){'' if self.last_step is not None else ' before its first step'}; dumping all thread stacks, killing its {len(children)} child "
                  f"process(es) and exiting with code {EXIT_CODE}\n")
        err = _stderr_fd()
        with contextlib.suppress(Exception):
            os.write(err, header.encode())
            faulthandler.dump_traceback(file=err, all_threads=True)
        with contextlib.suppress(Exception):
            fh, path = _open_dump(self.dump_dir, f"npu_runtime-watchdog-rank{rank}-pid{os.getpid()}.txt")
            with fh:
                fh.write(header)
                fh.flush()
                faulthandler.dump_traceback(file=fh, all_threads=True)
            self.dump_path = path
            os.write(err, f"npu_runtime watchdog: stacks written to {path}\n".encode())
        with contextlib.suppress(Exception):
            descendants.kill_descendants()
        self._killed.set()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):  # atexit does not run past os._exit
            from . import own_dirs

            own_dirs.remove_before_exit()
        os._exit(EXIT_CODE)


def _open_dump(directory: str | None, name: str):
    """A new file for the stack dump, never through a planted name: created with
    O_EXCL|O_NOFOLLOW (mode 0600) in ``directory``; when that is not set or the name is
    taken, in a new private directory (``mkdtemp``, mode 0700) under the temp dir."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    if directory:
        with contextlib.suppress(OSError):
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, name)
            return open(os.open(path, flags, 0o600), "w", closefd=True), path
    path = os.path.join(tempfile.mkdtemp(prefix="npu_runtime-watchdog-"), name)
    return open(os.open(path, flags, 0o600), "w", closefd=True), path


def _new_lock_in_child() -> None:
    global _active_lock
    _active_lock = threading.Lock()  # the checker thread may have held it at fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


_stderr_fd = _exitguard.stderr_fd
