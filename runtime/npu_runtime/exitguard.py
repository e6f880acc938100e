"""A finished job never hangs at exit.

A rank whose training is over can still hang on its way out: a process group freed in
finalisation (gloo joining threads that wait for the GIL the freeing thread holds, a DDP
reducer released after ``destroy_process_group``), a library's exit handler, a thread
nobody joins. The launcher then waits forever for a job that has finished.

Under ``install()`` the runtime watches that last stretch. The guard is **armed** when the
training is over:

- ``torch.distributed.destroy_process_group()`` returned (the script tore its group
  down: what follows is its teardown; names bound to it before ``install()``, such as a
  top-level ``from torch.distributed import destroy_process_group``, are re-pointed), or
- the interpreter starts to exit after the main script (or a ``multiprocessing`` /
  ``torch.multiprocessing.spawn`` worker's target) returned without an uncaught exception.
  A rank that died of one (or a worker that exits non-zero) is not a completed training:
  its exit is left to ``crash_class`` and the launcher. (A main script's own
  ``sys.exit(N)`` cannot be told from a return at that point: it arms the guard too.)

Once armed, the rank has ``NPU_RUNTIME_EXIT_TIMEOUT`` seconds (default 60; ``0`` turns the
guard off) without a sign of life (the watchdog's, when it runs: a step, a forward, an
import, a checkpoint write, ``beat()``) to exit. A checkpoint being written (a
``CheckpointManager`` save, a pending ``async_save`` waited for at exit, a ``torch.save``)
pauses the clock: the last checkpoint is durable before the guard may act. Other work
after ``destroy_process_group()`` that shows no sign of life for the whole timeout (a
long CPU-only computation) is ended too: call ``npu_runtime.beat()`` from it or raise the
timeout. Past the deadline the rank is ended with **exit 0** (the
training completed; the launcher must not restart a finished job), or with the status the
script gave ``sys.exit(N)`` (a script that said it failed is not reported finished), after

- one ``exit_hang`` health event (``NPU_RUNTIME_EVENTS`` and the log: how long, and
  what armed the guard) and every thread's stack on stderr, written by the guard's
  thread when Python can still run, which then SIGKILLs the rank's descendants (a
  worker hung holding its GIL that ``multiprocessing`` joins at exit was left spinning,
  orphaned);
- or, when the hang holds the GIL (no Python thread can run), by a C timer
  (``timer_create`` with ``SIGEV_THREAD`` calling ``_exit`` with that status) armed ``GRACE_S`` later:
  it needs no Python, so nothing is printed there but the process ends.

Standard library only (ctypes); imports torch only when ``install()`` patches it.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import logging
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

log = logging.getLogger("npu_runtime")

ENV_TIMEOUT = "NPU_RUNTIME_EXIT_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
#: the C backstop fires this long after the Python guard's deadline
GRACE_S = 5.0
MAX_TIMEOUT_S = 1e6

_lock = threading.Lock()
_state: dict[str, Any] = {"armed_by": None, "armed_at": None, "paused": 0, "thread": None, "pid": None,
                          "timeout_s": DEFAULT_TIMEOUT_S, "patched": False, "hooked": False, "exit_code": 0}
_ctimer: Any = None


def timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``NPU_RUNTIME_EXIT_TIMEOUT`` in seconds; 0 turns the guard off; a bad value is the default."""
    environ = os.environ if environ is None else environ
    raw = (environ.get(ENV_TIMEOUT) or "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw[:64])
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_TIMEOUT_S:
        log.warning("npu_runtime: %s=%r is not a number of seconds in [0, %g]; using %g", ENV_TIMEOUT, raw[:64],
                    MAX_TIMEOUT_S, DEFAULT_TIMEOUT_S)
        return DEFAULT_TIMEOUT_S
    return value


def install(environ: Mapping[str, str] | None = None) -> None:
    """Arm the guard when the training is over (see the module text). Called by ``install()``."""
    timeout_s = timeout_from_env(environ)
    with _lock:
        _state["timeout_s"] = timeout_s
        if timeout_s <= 0:
            return
        if not _state["hooked"] or _state["pid"] != os.getpid():
            register = getattr(threading, "_register_atexit", None)  # runs before atexit handlers
            if register is not None:
                with contextlib.suppress(RuntimeError):
                    register(_at_exit)
            _state["hooked"] = True
            _state["pid"] = os.getpid()
    _patch_destroy()
    _patch_exit()


def _status(code: Any) -> int:
    """The process status ``sys.exit(code)`` ends with: None 0, an int its low byte, else 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def _patch_exit() -> None:
    """Remember the status the script asked for with ``sys.exit(N)``: a rank that hangs on its
    way out after ``sys.exit(3)`` is ended with 3, not with 0 (a failed job reported as
    finished, never restarted). A SystemExit raised without ``sys.exit`` is not seen."""
    current = sys.exit
    if getattr(current, "_npu_runtime", False):
        return

    def exit(status: Any = None) -> Any:
        _state["exit_code"] = _status(status)
        return current(status)

    exit._npu_runtime = True  # type: ignore[attr-defined]
    exit.__wrapped__ = current  # type: ignore[attr-defined]
    exit.__doc__ = current.__doc__
    sys.exit = exit


def _patch_save() -> None:
    """``torch.save`` stops the clock while the guard is armed: the script's own last
    checkpoint (written after ``destroy_process_group()``) is never cut short."""
    import torch

    original = torch.save
    if getattr(original, "_npu_runtime", False):
        return

    def save(*args: Any, **kwargs: Any) -> Any:
        if _state["armed_by"] is None:
            return original(*args, **kwargs)
        with paused():
            return original(*args, **kwargs)

    save.__wrapped__ = original  # type: ignore[attr-defined]
    save.__doc__ = original.__doc__
    save._npu_runtime = True  # type: ignore[attr-defined]
    torch.save = save


def _patch_destroy() -> None:
    try:
        _patch_save()
        import torch.distributed as dist
    except Exception:  # noqa: BLE001 - no torch.distributed: the exit hook still guards
        return
    original = getattr(dist, "destroy_process_group", None)
    if original is None or getattr(original, "_npu_runtime", False):
        return

    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):  # the rank an exit_hang event names, while the group says it
            from . import health

            monitor = health.active()
            if monitor is not None:
                monitor.learn_rank()
        result = original(*args, **kwargs)
        if not (args or kwargs.get("group") is not None) or not dist.is_initialized():
            arm("destroy_process_group() returned")  # the default group: the job's collectives are over
        return result

    destroy_process_group.__wrapped__ = original  # type: ignore[attr-defined]
    destroy_process_group.__doc__ = original.__doc__
    destroy_process_group._npu_runtime = True  # type: ignore[attr-defined]
    dist.destroy_process_group = destroy_process_group
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is not None and getattr(c10d, "destroy_process_group", None) is original:
        c10d.destroy_process_group = destroy_process_group
    _rebind(original, destroy_process_group)


#: Packages whose own references to a patched function are left alone (torch's internals,
#: the emulator's stand-in, this package).
_NOT_REBOUND = ("torch", "torch_npu", "npu_runtime")


def _rebind(original: Any, replacement: Any) -> None:
    """Point the module-level names already bound to ``original`` at ``replacement``.

    ``from torch.distributed import destroy_process_group`` at the top of a script (as
    pytorch/examples' multigpu.py writes it) runs before ``install()`` patches the module
    attribute, and a ``spawn`` worker imports the main module before the runtime is
    installed in it: the script then called the unpatched function, the guard was never
    armed, and a rank that hung after it was never ended.

    The functions' own globals are searched too: ``runpy`` (``python -m``, and the main
    module a ``spawn`` worker re-imports as ``__mp_main__``) runs a module in a temporary
    namespace and keeps a *copy* of it, so the functions of such a module (the worker's
    target) read names from a dict that is no module's."""
    namespaces: dict[int, dict] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".", 1)[0] in _NOT_REBOUND:
            continue
        with contextlib.suppress(Exception):  # odd module objects (lazy proxies) are skipped
            namespace = vars(module)
            namespaces[id(namespace)] = namespace
            for value in list(namespace.values()):
                if isinstance(value, types.FunctionType):
                    namespaces.setdefault(id(value.__globals__), value.__globals__)
    for namespace in namespaces.values():
        with contextlib.suppress(Exception):
            for key, value in list(namespace.items()):
                if value is original:
                    namespace[key] = replacement


def _worker_exit_code() -> Any:
    """In a multiprocessing worker exiting: the exit code ``Process._bootstrap`` holds."""
    with contextlib.suppress(Exception):
        import multiprocessing.process

        code = multiprocessing.process.BaseProcess._bootstrap.__code__
        frame = sys._getframe()
        while frame is not None:
            if frame.f_code is code:
                return frame.f_locals.get("exitcode")
            frame = frame.f_back
    return 0


def _at_exit() -> None:
    if getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None:
        return  # died of an exception: crash_class and the launcher decide, not us
    if _worker_exit_code() not in (0, None):
        return
    from . import crash_class

    if crash_class._code is not None:
        return
    arm("the script returned")


def armed() -> str | None:
    return _state["armed_by"]


def note_life() -> None:
    """A sign of life (``npu_runtime.beat()``): the armed guard's clock starts again."""
    if _state["armed_by"] is not None:
        _state["armed_at"] = time.monotonic()


def arm(reason: str) -> None:
    """Training is over: from now on the rank has the exit timeout to end."""
    with _lock:
        timeout_s = _state["timeout_s"]
        if timeout_s <= 0:
            return
        if _state["armed_by"] is not None and _state["pid"] == os.getpid() and _state["thread"] is not None:
            _state["armed_at"] = time.monotonic()  # armed again (destroy, then exit): the later start counts
            _set_ctimer(timeout_s + GRACE_S)  # the C timer too, with the status sys.exit may have given since
            return
        _state["armed_by"] = reason
        _state["armed_at"] = time.monotonic()
        _state["pid"] = os.getpid()
        thread = threading.Thread(target=_guard, args=(timeout_s,), name="npu_runtime-exit-guard", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # the interpreter no longer starts threads: the C timer alone guards
            _set_ctimer(timeout_s + GRACE_S)
            return
        _state["thread"] = thread
    _set_ctimer(timeout_s + GRACE_S)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Stop the clock around work that must finish (a checkpoint becoming durable)."""
    with _lock:
        _state["paused"] += 1
    _set_ctimer(None)
    try:
        yield
    finally:
        with _lock:
            _state["paused"] -= 1
            _state["armed_at"] = time.monotonic()
        if _state["armed_by"] is not None:
            _set_ctimer(_state["timeout_s"] + GRACE_S)


def watch_life(source: Callable[[], float] | None) -> None:
    """The active watchdog's clock of the last sign of life (``None``: no watchdog).
    The watchdog registers itself here, so this module stays below it."""
    _life_source[0] = source


_life_source: list[Callable[[], float] | None] = [None]


def stderr_fd() -> int:
    """The process's stderr descriptor, for writes that must not go through Python's
    (possibly replaced or closed) stream objects."""
    for stream in (sys.stderr, sys.__stderr__):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # replaced/closed streams
            return stream.fileno()  # type: ignore[union-attr]
    return 2


def _last_life() -> float:
    last = _state["armed_at"] or time.monotonic()
    source = _life_source[0]
    if source is not None:
        with contextlib.suppress(Exception):
            last = max(last, source())
    return last


def _guard(timeout_s: float) -> None:
    interval = min(max(timeout_s / 10.0, 0.05), 2.0)
    backstop_for = None
    while True:
        time.sleep(interval)
        if _state["armed_by"] is None:  # disarmed (tests)
            return
        if _state["paused"]:
            backstop_for = None
            continue
        last = _last_life()
        idle = time.monotonic() - last
        if idle >= timeout_s:
            _expire(idle, timeout_s)
            return
        if backstop_for != last:  # a sign of life moved the deadline: move the C timer with it
            _set_ctimer(timeout_s - idle + GRACE_S)
            backstop_for = last


def _expire(idle: float, timeout_s: float) -> None:
    from . import health

    reason = _state["armed_by"]
    code = _state["exit_code"]
    why = "the job finished" if code == 0 else "the status the script gave sys.exit"
    err = stderr_fd()
    with contextlib.suppress(Exception):
        os.write(err, (f"\nnpu_runtime: the training is over ({reason}) but this process has not exited for "
                       f"{idle:.1f} s ({ENV_TIMEOUT}={timeout_s:g}); every thread's stack follows; ending it with "
                       f"exit {code} ({why})\n").encode())
        faulthandler.dump_traceback(file=err, all_threads=True)
    with contextlib.suppress(Exception):
        monitor = health.active()
        if monitor is not None:
            monitor.emit("exit_hang", idle, timeout_s)
            monitor.flush(1.0)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    # What the exit waits for (a worker that multiprocessing joins, hung holding its GIL)
    # must not outlive the rank, orphaned and spinning.
    with contextlib.suppress(Exception):
        from . import descendants

        descendants.kill_descendants()
    with contextlib.suppress(Exception):  # atexit does not run past os._exit
        from . import own_dirs

        own_dirs.remove_before_exit()
    os._exit(code)


# ----------------------------------------------------------------------------- C backstop
class _SigVal(ctypes.Union):
    _fields_ = [("sival_int", ctypes.c_int), ("sival_ptr", ctypes.c_void_p)]


class _SigEvent(ctypes.Structure):  # struct sigevent on Linux (64 bytes)
    _fields_ = [("sigev_value", _SigVal), ("sigev_signo", ctypes.c_int), ("sigev_notify", ctypes.c_int),
                ("sigev_notify_function", ctypes.c_void_p), ("sigev_notify_attributes", ctypes.c_void_p),
                ("_pad", ctypes.c_byte * 32)]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


_SIGEV_THREAD = 2
_CLOCK_MONOTONIC = 1


def _set_ctimer(seconds: float | None) -> bool:
    """Arm (or with None, disarm) a timer whose expiry runs ``_exit(status)`` on a thread of
    its own, without the GIL (status: what the script gave sys.exit, else 0). Linux/glibc
    only; False where it cannot be made."""
    global _ctimer
    if not sys.platform.startswith("linux"):
        return False
    if seconds is None and (_ctimer is None or _ctimer[0] != os.getpid()):
        return True  # nothing armed in this process
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        code = _state["exit_code"]
        if _ctimer is not None and _ctimer[0] == os.getpid() and _ctimer[2] != code and seconds is not None:
            libc.timer_delete(_ctimer[1])  # made before sys.exit(N): its _exit argument is fixed
            _ctimer = None
        if _ctimer is None or _ctimer[0] != os.getpid():  # timers are not inherited through fork
            if seconds is None:
                return True
            event = _SigEvent()
            event.sigev_notify = _SIGEV_THREAD
            event.sigev_value.sival_ptr = code  # _exit(code)
            event.sigev_notify_function = ctypes.cast(libc._exit, ctypes.c_void_p).value
            timer = ctypes.c_void_p()
            if libc.timer_create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
                return False
            _ctimer = (os.getpid(), timer, code)
        spec = _ITimerSpec()
        if seconds is not None:
            seconds = max(float(seconds), 0.001)
            spec.it_value.tv_sec = int(seconds)
            spec.it_value.tv_nsec = int((seconds - int(seconds)) * 1e9)
        return libc.timer_settime(_ctimer[1], 0, ctypes.byref(spec), None) == 0
    except Exception:  # noqa: BLE001 - no backstop where ctypes or the timer is missing
        return False


def _reset_for_tests() -> None:
    _set_ctimer(None)
    with _lock:
        _state.update(armed_by=None, armed_at=None, paused=0, thread=None, exit_code=0)
    if getattr(sys.exit, "_npu_runtime", False):
        sys.exit = sys.exit.__wrapped__
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        wrapped = dist.destroy_process_group
        if getattr(wrapped, "_npu_runtime", False):
            dist.destroy_process_group = wrapped.__wrapped__
            c10d = sys.modules.get("torch.distributed.distributed_c10d")
            if c10d is not None and getattr(c10d, "destroy_process_group", None) is wrapped:
                c10d.destroy_process_group = wrapped.__wrapped__
            _rebind(wrapped, wrapped.__wrapped__)
        import torch

        if getattr(torch.save, "_npu_runtime", False):
            torch.save = torch.save.__wrapped__


def _forget_after_fork() -> None:
    global _lock, _ctimer
    _lock = threading.Lock()
    _ctimer = None
    _state.update(armed_by=None, armed_at=None, paused=0, thread=None, hooked=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
