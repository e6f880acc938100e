"""The supervisor of one twin's run: every process the run starts ends with it.

``python -m npu_migrate.verify.supervise --parent PID -- COMMAND...`` runs COMMAND
(the twin: ``python -m npu_migrate.verify.entry`` or torchrun) and, however it ends,
kills what COMMAND left behind before exiting with COMMAND's status (128+N for a
signal N). Two mechanisms, because each misses a case the other catches:

* the supervisor is a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux
  >= 3.4): a child the script starts and does not wait for, a double-forked daemon,
  a ``setsid`` one, are re-parented to it instead of to init when their parent
  exits, so its process tree (read from ``/proc``) holds every descendant until it
  exits; it stops (SIGSTOP) and kills (SIGKILL) that tree and reaps it;
* every process of the run inherits the marker ``NPU_MIGRATE_VERIFY_RUN=<token>`` in
  its environment; verify sweeps ``/proc/*/environ`` for it after the supervisor is
  gone (``sweep``), which catches descendants of a supervisor that was killed
  itself (a timeout's SIGKILL) and is the only mechanism off Linux-with-prctl.

A process that both leaves the tree while the supervisor is not alive and clears
its environment escapes both; verify, a child subreaper itself, ends what is
re-parented to it (npu_migrate/verify/twins.py ``_end_orphans``), so only a verify
killed by SIGKILL leaves such a process; nothing short of a cgroup or a PID
namespace (which need privileges) catches that.

The supervisor ends the tree on SIGTERM, SIGHUP and SIGINT too, and asks for
SIGTERM when verify dies (``PR_SET_PDEATHSIG``), so a verify killed by SIGKILL does
not leave its twins running. Standard library only: it starts before the twin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

MARKER = "NPU_MIGRATE_VERIFY_RUN"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: Seconds the supervisor spends killing and reaping the tree at most.
KILL_DEADLINE_S = 10.0


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _state(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _live(pid: int) -> bool:
    return _state(pid) not in (None, b"Z", b"X")


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` from /proc (parents first); empty off Linux."""
    return below([pid], children_of())


def below(roots: list[int], children: dict[int, list[int]]) -> list[int]:
    """The descendants of ``roots`` in ``children`` (:func:`children_of`), parents first."""
    out, todo = [], list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


def children_of() -> dict[int, list[int]]:
    """Parent pid -> its children's pids, from one pass over /proc; empty off Linux."""
    children: dict[int, list[int]] = {}
    for child in _pids():
        try:
            with open(f"/proc/{child}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # "pid (comm) state ppid ..."
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(child)
    return children


def _stop_and_kill(pids: list[int]) -> None:
    for pid in pids:  # frozen first: nobody forks or respawns meanwhile
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGSTOP)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(deadline_s: float = KILL_DEADLINE_S) -> None:
    """Kill and reap every descendant of this process (bounded)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        live = [pid for pid in descendants(os.getpid()) if _live(pid)]
        _reap()
        if not live:
            return
        _stop_and_kill(live)
        time.sleep(0.02)
        _reap()


def marked(token: str, spare: frozenset[int] = frozenset()) -> list[int]:
    """Live processes (this user's) whose environment holds the marker ``token``, but
    those in ``spare``."""
    needle = f"{MARKER}={token}".encode() + b"\0"
    me, out = os.getpid(), []
    for pid in _pids():
        if pid == me or pid in spare:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if (env + b"\0").find(needle) >= 0 and _live(pid):
            out.append(pid)
    return out


def sweep(token: str, rounds: int = 20, spare: frozenset[int] = frozenset()) -> list[int]:
    """Kill every live process carrying the marker ``token`` (but ``spare``); returns the
    pids killed."""
    killed: list[int] = []
    for _ in range(rounds):
        live = marked(token, spare)
        if not live:
            break
        _stop_and_kill(live)
        killed += [pid for pid in live if pid not in killed]
        time.sleep(0.02)
    return killed


class _Ended(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _ended(signum, frame):
    raise _Ended(signum)


def main(argv: list[str]) -> int:
    parent = None
    if argv[:1] == ["--parent"]:
        parent, argv = int(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m npu_migrate.verify.supervise [--parent PID] -- COMMAND...", file=sys.stderr)
        return 2
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _ended)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if _prctl(PR_SET_PDEATHSIG, signal.SIGTERM) and parent is not None and os.getppid() != parent:
        return 128 + signal.SIGTERM  # verify is already gone
    code = 128 + signal.SIGTERM
    try:
        try:
            child = subprocess.Popen(argv)
        except OSError as exc:
            print(f"npu-migrate verify: cannot start {argv[0]}: {exc.strerror}", file=sys.stderr)
            return 127
        code = child.wait()
        if code < 0:
            code = 128 - code
    except _Ended as ended:
        code = 128 + ended.signum
    finally:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)  # the cleanup runs to its end
        kill_tree()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
