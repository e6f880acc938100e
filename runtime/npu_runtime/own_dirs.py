"""Temporary directories this process made for its workers, removed when it exits: at a
normal exit by ``atexit``, and before the runtime's own ``os._exit`` calls (the watchdog's
75, the health monitor's exit class, a hung teardown's 0, a worker's exit class), which
skip ``atexit``. Each fresh-clone CI run had left some 50 ``npu_runtime-heartbeat-*``
directories in the temporary directory. Imports nothing of the runtime, so every module
that ends the process may use it."""

from __future__ import annotations

import atexit
import os
import shutil

#: path -> pid of the process that made it (a forked child inherits the table, not the directory)
_made: dict[str, int] = {}


def own(path: str) -> None:
    """``path`` was made by this process: remove it when this process exits."""
    _made[path] = os.getpid()
    atexit.register(_remove, path)


def remove_before_exit() -> None:
    """Remove this process's directories now (before an ``os._exit``)."""
    for path in list(_made):
        _remove(path)


def _remove(path: str) -> None:
    if _made.get(path) == os.getpid():
        shutil.rmtree(path, ignore_errors=True)
        _made.pop(path, None)
