"""An out-of-process backstop for workers whose own watchdog cannot run.

A worker hung in C code that holds the GIL stops every Python thread, its watchdog's
checker included. In a spawned worker faulthandler's C timer still ends it (the
in-process backstop); in a *forked* one that timer is unusable (its thread did not
survive ``fork()``), and the parent, waiting in ``join()``, counts as alive.

So the checker thread of every watched worker of an installed parent touches a file
``<dir>/<pid>`` (its budget, timeout + grace, inside) once per check interval, whatever
the worker is doing: the file says "my watchdog can run", not "I am making progress".
The parent's checker looks at the directory every interval; a worker that is still a live
descendant and whose file is older than its budget plus two intervals has a watchdog that
cannot run: the parent kills the worker's tree, notes the hang class for its own exit
code (``children.py``) and says so on stderr. ``<dir>`` is a private ``mkdtemp``
directory (mode 0700) made by the parent, named in ``NPU_RUNTIME_HEARTBEAT_DIR``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from . import own_dirs

ENV_DIR = "NPU_RUNTIME_HEARTBEAT_DIR"
PREFIX = "npu_runtime-heartbeat-"
_own_dir: str | None = None


def create_for_children() -> None:
    """In an installed parent: make the private directory and name it for the workers."""
    global _own_dir
    if _own_dir is not None and os.environ.get(ENV_DIR, "").endswith(_own_dir):
        return
    # removed at exit, also past os._exit; a SIGKILLed maker's is swept by the next (own_dirs.py)
    _own_dir = own_dirs.make(PREFIX)
    os.environ[ENV_DIR] = f"{os.getpid()}:{_own_dir}"


def _parent_dir() -> str | None:
    """The directory of this worker's installed parent (not this process's own)."""
    owner, _, path = os.environ.get(ENV_DIR, "").partition(":")
    if not path or owner == str(os.getpid()):
        return None
    return path


def _forget_after_fork() -> None:
    global _own_dir
    _own_dir = None  # the parent's directory is the parent's to check


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class Beacon:
    """A worker's heartbeat file, touched by its watchdog's checker thread."""

    def __init__(self, budget_s: float, interval_s: float) -> None:
        self.path: str | None = None
        directory = _parent_dir()
        if directory is None:
            return
        path = os.path.join(directory, str(os.getpid()))
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        with contextlib.suppress(OSError):
            fd = os.open(path, flags, 0o600)
            try:
                os.write(fd, f"{budget_s + 2 * interval_s:.3f}\n".encode())
            finally:
                os.close(fd)
            self.path = path

    def touch(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def remove(self) -> None:
        path, self.path = self.path, None
        if path is not None:
            with contextlib.suppress(OSError):
                os.remove(path)


def check_workers() -> list[int]:
    """In the parent: kill every worker whose watchdog stopped running; their pids."""
    if _own_dir is None:
        return []
    from . import children, descendants, exitcodes

    try:
        names = os.listdir(_own_dir)
    except OSError:
        return []
    if not names:
        return []
    killed = []
    mine = set(descendants.descendants())
    now = time.time()
    for name in names:
        path = os.path.join(_own_dir, name)
        if not name.isdigit() or int(name) not in mine:
            with contextlib.suppress(OSError):
                os.remove(path)  # exited (or not ours)
            continue
        try:
            with open(path, "rb") as fh:
                budget = float(fh.read(32) or b"inf")
            age = now - os.stat(path).st_mtime
        except (OSError, ValueError):
            continue
        if age <= budget:
            continue
        pid = int(name)
        with contextlib.suppress(OSError):
            os.write(sys.stderr.fileno() if sys.stderr else 2,
                     (f"\nnpu_runtime watchdog: worker process {pid} has not run its watchdog for {age:.1f} s "
                      f"(budget {budget:g} s): hung in C code holding the GIL; killing it and its children\n").encode())
        descendants.kill_descendants(pid)
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        children.note_class(exitcodes.HANG, pid)
        with contextlib.suppress(OSError):
            os.remove(path)
        killed.append(pid)
    return killed
