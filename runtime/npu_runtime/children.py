"""The runtime in worker processes started by an installed process.

``install()`` writes its settings into the environment (``NPU_RUNTIME_INSTALLED``) and
registers a ``multiprocessing`` after-fork hook. ``multiprocessing`` runs registered
hooks at the start of every child's ``Process._bootstrap``, after the child's Process
object is current and before its target runs, whatever the start method:

- **fork**: the hook registry is inherited from the parent;
- **spawn / forkserver**: the child is a fresh interpreter that imports the parent's
  main module (as ``__mp_main__``) and the target's module before bootstrapping. When
  one of them imports ``npu_runtime`` at top level (NPU701 writes ``import npu_runtime``
  at the top of every entry point), the package finds the mark and registers the hook
  again. ``SpawnProcess`` skips the after-fork hooks ("nothing to do"), so in a spawn
  child being prepared the package also gives ``SpawnProcess._after_fork`` (this
  process's copy of the class) a body that runs this hook, and nothing else.

The hook then looks at the child's target:

- ``torch.multiprocessing.spawn`` / ``start_processes`` workers get ``install()`` with
  ``local_rank`` = their spawn index, so a node-level launch with several devices
  (Ascend Operator, ModelArts) resolves this worker's rank, exports torchrun's
  variables and sets its device;
- other ``multiprocessing.Process`` targets (and subclasses overriding ``run``) get
  ``install()`` as their parent did: the inherited environment, device when it resolves
  to a rank, a watchdog of their own;
- library infrastructure gets nothing: DataLoader workers, ``multiprocessing.Pool`` and
  ``concurrent.futures`` workers, manager servers, torchrun's function workers (their
  environment is set only inside the target).

A parent that waits to join its workers counts as alive for its own watchdog (see
``watchdog.py``): each worker has its own.

**A worker's failure class reaches its parent's exit code.** When a worker that
``multiprocessing`` (or ``torch.multiprocessing.spawn``) started ends with one of the
runtime's exit classes (``exitcodes.py``: 75 hang, 76 health, 77 hardware, 78 fatal),
the installed parent notes it as soon as ``multiprocessing`` learns the code (``join``,
``exitcode``, ``is_alive``, ``active_children``, torch's ``ProcessContext.join``), and
exits with that class at the end, whether it would have exited 0 (a ``join()`` that
never looked at ``exitcode``) or 1 (torch's ``ProcessExitedException`` traceback): the
launcher sees a hang, not a success. The first class noted wins.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("npu_runtime")

ENV_MARK = "NPU_RUNTIME_INSTALLED"

# Targets that are library machinery, not training workers (module prefixes).
_INFRASTRUCTURE = (
    "torch.utils.data",
    "torch.distributed.elastic",
    "multiprocessing.pool",
    "multiprocessing.managers",
    "concurrent.futures",
)
_TORCH_SPAWN_WRAP = ("torch.multiprocessing.spawn", "_wrap")


class _Anchor:
    """The object multiprocessing's weak registry keeps the hook under."""


_anchor = _Anchor()
_registered = False  # inherited through fork together with the registry itself
_handled_pid: int | None = None
#: What runs in each worker (``install.install_in_worker``): install.py hands it over,
#: so that this module, below install.py, never imports it.
_installer: Callable[[Any], None] | None = None


def register(installer: Callable[[Any], None]) -> None:
    """Run ``installer(process)`` in every multiprocessing child of this process."""
    global _registered, _installer
    _installer = installer
    if _registered:
        return
    from multiprocessing import util

    util.register_after_fork(_anchor, _on_child_start)
    _registered = True


def register_if_marked(installer: Callable[[Any], None]) -> None:
    """At import: in a process whose parent ran install(), arm the hook for its children
    and for itself (a spawn child imports the package before it bootstraps)."""
    if os.environ.get(ENV_MARK):
        register(installer)
        _hook_spawn_bootstrap()


def _hook_spawn_bootstrap() -> None:
    import multiprocessing.process

    if not getattr(multiprocessing.process.current_process(), "_inheriting", False):
        return  # not a spawn/forkserver child being prepared
    from multiprocessing import context

    cls = getattr(context, "SpawnProcess", None)
    if cls is None or getattr(cls.__dict__.get("_after_fork"), "_npu_runtime", False):
        return
    original = cls.__dict__.get("_after_fork")

    def _after_fork() -> None:
        if isinstance(original, staticmethod):
            original.__func__()
        _on_child_start(_anchor)

    _after_fork._npu_runtime = True  # type: ignore[attr-defined]
    cls._after_fork = staticmethod(_after_fork)


def mark_installed(watchdog: bool | None, timeout_s: float | None, installer: Callable[[Any], None]) -> None:
    """In a process that ran install(): its settings into the environment, for the
    workers; ``installer(process)`` in each worker; the workers' exit classes noted."""
    os.environ[ENV_MARK] = json.dumps({"watchdog": watchdog, "timeout_s": timeout_s})
    register(installer)
    track_exit_classes()


def settings() -> dict[str, Any]:
    """In a worker: the settings its installed parent wrote (``{}`` when unreadable)."""
    try:
        found = json.loads(os.environ.get(ENV_MARK) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


_child_class: int | None = None
_tracking = False


def note_class(code: Any, pid: Any) -> None:
    """A worker ended with ``code``: if it is a runtime exit class, this process will exit
    with it (the first noted wins)."""
    global _child_class
    from . import exitcodes

    if _child_class is None and code in exitcodes.NAMES:
        _child_class = code
        log.error("npu_runtime: worker process %s exited with %d (%s); this process will exit with %d too",
                  pid, code, exitcodes.NAMES[code], code)


def _note_exit(popen: Any) -> None:
    note_class(getattr(popen, "returncode", None), getattr(popen, "pid", "?"))


def _wrap_poll(cls: Any) -> None:
    original = cls.__dict__.get("poll")
    if original is None or getattr(original, "_npu_runtime", False):
        return

    def poll(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if result is not None:
            _note_exit(self)
        return result

    poll._npu_runtime = True  # type: ignore[attr-defined]
    cls.poll = poll


def track_exit_classes() -> None:
    """Note workers that end with a runtime exit class; exit with it at the end."""
    global _tracking
    if _tracking:
        return
    import atexit
    import importlib

    for name in ("multiprocessing.popen_fork", "multiprocessing.popen_forkserver"):
        try:
            _wrap_poll(importlib.import_module(name).Popen)
        except (ImportError, AttributeError):  # a platform without it
            continue
    atexit.register(_exit_with_child_class)
    _tracking = True


def _exit_with_child_class() -> None:
    """At exit: if a worker ended with a runtime class, end with it as well (after the
    cleanup the skipped handlers would do: multiprocessing's, logging's, stdio)."""
    import contextlib
    import multiprocessing

    with contextlib.suppress(Exception):
        multiprocessing.active_children()  # polls (and notes) workers that ended unnoticed
    if _child_class is not None:
        exit_now(_child_class)


def exit_now(code: int) -> None:
    """End the process with ``code`` from an atexit handler, after the cleanup the
    skipped handlers would do (multiprocessing's, logging's, stdio)."""
    import contextlib
    import logging as _logging
    import sys

    with contextlib.suppress(Exception):
        from multiprocessing import util

        util._exit_function()
    with contextlib.suppress(Exception):
        _logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):  # atexit does not run past os._exit
        from . import own_dirs

        own_dirs.remove_before_exit()
    os._exit(code)


def classify(target: Any, args: tuple) -> tuple[str | None, int | None]:
    """(kind, local_rank) for a child's target: ("spawn[i]", i), ("process", None) or
    (None, None) for library machinery."""
    if target is None:
        return "process", None  # a Process subclass with its own run()
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", "")
    if (module, name) == _TORCH_SPAWN_WRAP:
        index = args[1] if len(args) > 1 and isinstance(args[1], int) else None
        return f"spawn[{index}]", index
    if any(module == m or module.startswith(m + ".") for m in _INFRASTRUCTURE):
        return None, None
    return "process", None


def _on_child_start(_anchor_obj: Any) -> None:
    """Never raises: a failure is logged and the worker runs without the runtime."""
    global _handled_pid
    if _handled_pid == os.getpid() or _installer is None:
        return
    _handled_pid = os.getpid()
    import multiprocessing

    proc = multiprocessing.current_process()
    try:
        _installer(proc)
    except Exception:
        log.exception("npu_runtime: the runtime could not be installed in worker process %s", proc.name)
