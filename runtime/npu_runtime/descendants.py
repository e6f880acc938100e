"""Find and kill this process's descendants (data-loader workers and the like).

A rank the watchdog kills must not leave its children behind: a data-loader worker
hung inside ``__getitem__`` never looks at its parent again, and under launchers that
do not kill the whole process group (ModelArts per-card scripts, ``mp.spawn``, a plain
``python train.py``) it would live on, holding memory and files. Linux: the process
tree from ``/proc``; elsewhere, the children ``multiprocessing`` knows about.
"""

from __future__ import annotations

import contextlib
import os
import signal


def _proc_parents() -> dict[int, int] | None:
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    parents: dict[int, int] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # exited meanwhile
            continue
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            parents[int(name)] = int(fields[1])
    return parents


def descendants(pid: int | None = None) -> list[int]:
    """Pids of every live descendant of ``pid`` (default: this process), parents first."""
    pid = os.getpid() if pid is None else pid
    parents = _proc_parents()
    if parents is None:
        import multiprocessing

        with contextlib.suppress(Exception):
            return [p.pid for p in multiprocessing.active_children() if p.pid]
        return []
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


def kill_descendants(pid: int | None = None) -> list[int]:
    """SIGKILL every descendant; returns the pids signalled."""
    killed = []
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)
            killed.append(child)
    return killed
