"""Temporary directories this process made for its workers, removed when it exits: at a
normal exit by ``atexit``, and before the runtime's own ``os._exit`` calls (the watchdog's
75, the health monitor's exit class, a hung teardown's 0, a worker's exit class), which
skip ``atexit``. Each fresh-clone CI run had left some 50 ``npu_runtime-heartbeat-*``
directories in the temporary directory; after that fix, some 17 were still left by
processes ended with SIGKILL, which runs no code at all. So the name of such a directory
carries its maker's pid (:func:`make`), and the next process that makes one removes those
of makers that are gone (:func:`sweep`). Imports nothing of the runtime, so every module
that ends the process may use it."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import stat
import tempfile

#: path -> pid of the process that made it (a forked child inherits the table, not the directory)
_made: dict[str, int] = {}


def own(path: str) -> None:
    """``path`` was made by this process: remove it when this process exits."""
    _made[path] = os.getpid()
    atexit.register(_remove, path)


def make(prefix: str) -> str:
    """A private temporary directory ``<prefix><pid namespace>.<pid>-<random>`` owned by
    this process, after sweeping the directories of that prefix whose makers are gone."""
    sweep(prefix)
    path = tempfile.mkdtemp(prefix=f"{prefix}{pid_namespace()}.{os.getpid()}-")
    own(path)
    return path


def sweep(prefix: str, directory: str | None = None, remove=None) -> list[str]:
    """Remove the directories ``<prefix><ns>.<pid>-*`` of ``directory`` (the temporary one)
    that this user made in this pid namespace and whose maker ``pid`` no longer runs; the
    paths removed. A directory of a live process, of another user, of another pid
    namespace (a container sharing the temporary directory, whose pids this process
    cannot see), or a link is never touched; a pid reused by a new process keeps its
    directory (it is swept once that one is gone). ``remove(path) -> bool`` removes one
    (verify's, which also empties trees its twins made too deep or unreadable); by default
    ``shutil.rmtree`` with errors ignored."""
    directory = directory or tempfile.gettempdir()
    shape = re.compile(re.escape(prefix) + r"([0-9]+)\.([0-9]+)-[^/]+")
    here = str(pid_namespace())
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        found = shape.fullmatch(name)
        if found is None or found.group(1) != here or _alive(int(found.group(2))):
            continue
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()):
            continue
        if remove is None:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif remove(path):
            removed.append(path)
    return removed


def pid_namespace() -> int:
    """The inode of this process's pid namespace (0 where the system does not say)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or no pid at all: not ours to judge
    return True


def remove_before_exit() -> None:
    """Remove this process's directories now (before an ``os._exit``)."""
    for path in list(_made):
        _remove(path)


def _remove(path: str) -> None:
    if _made.get(path) == os.getpid():
        shutil.rmtree(path, ignore_errors=True)
        _made.pop(path, None)
