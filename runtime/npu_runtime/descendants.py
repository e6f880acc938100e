"""Find and kill this process's descendants (data-loader workers and the like).

A rank the watchdog kills must not leave its children behind: a data-loader worker
hung inside ``__getitem__`` never looks at its parent again, and under launchers that
do not kill the whole process group (ModelArts per-card scripts, ``mp.spawn``, a plain
``python train.py``) it would live on, holding memory and files. Linux: the process
tree from ``/proc``; elsewhere, the children ``multiprocessing`` knows about.

Descendants that leave the tree are tracked too: a watched process becomes a *child
subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux >= 3.4), so a daemon helper that
double-forks or runs ``setsid -f`` (its parent exits, it moves to another session) is
re-parented to the rank instead of to init and stays in the tree. Killing stops the
whole tree first (SIGSTOP: nobody forks or respawns meanwhile), then SIGKILLs it, and
repeats until no live descendant is left (bounded). A subreaper also inherits the
zombies of such orphans; they are reaped by init when the rank exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
_subreaper = False


def become_subreaper() -> bool:
    """Adopt this process's orphaned descendants (Linux); True if it now does."""
    global _subreaper
    if _subreaper:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    return _subreaper


def _forget_after_fork() -> None:
    global _subreaper
    _subreaper = False  # PR_SET_CHILD_SUBREAPER is not inherited by fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


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


def kill_descendants(pid: int | None = None, *, rounds: int = 5, settle_s: float = 0.0) -> list[int]:
    """Stop, then SIGKILL every live descendant, again until none is left (at most
    ``rounds`` times); returns the pids signalled. No pause by default: the caller is
    about to exit, and its main thread may react to the dying children meanwhile."""
    killed: list[int] = []
    for _ in range(rounds):
        live = [child for child in descendants(pid) if _live(child)]
        if not live:
            break
        for child in live:  # frozen first: nobody forks, respawns or reparents meanwhile
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGSTOP)
        for child in live:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
                if child not in killed:
                    killed.append(child)
        if settle_s:
            time.sleep(settle_s)
    return killed
