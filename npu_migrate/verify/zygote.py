"""The fork server for one twin's one-process runs (docs/verify.md "Time"; on by default,
off with ``--no-fork-server`` or ``NPU_MIGRATE_FORK_SERVER=0``).

``python -m npu_migrate.verify.zygote SOCKET`` (under the supervisor,
npu_migrate/verify/supervise.py) imports torch, the emulated NPU (torch's backend
autoload) and verify's hook modules once, then serves runs on the Unix socket SOCKET:
a request is one JSON line ``{"argv", "cwd", "env", "log"}``; the answer is
``{"fresh": why}`` (the run must be a fresh process) or ``{"pid": N}`` and, when the
run has ended and every process it left is killed, ``{"status": code}``.

What keeps a forked run what a fresh process would be (each a condition checked per
run, else ``fresh``):

* the environment differs only in ``NPU_MIGRATE_VERIFY_*`` (read at boot, after the
  fork) and in the temporary directory (``TMPDIR``/``TMP``/``TEMP``, a directory of the
  run's own in the scratch: ``tempfile`` reads it again in the run); everything else is
  the server's own, which its imports read;
* no Python thread exists at the fork (one native thread does: numpy's OpenBLAS
  server, which handles fork itself, as in every forked DataLoader worker);
* nothing the server imported is shadowed by the run's working directory or the
  script's directory (a fresh run would import the project's module);
* the run leaves through the interpreter's normal exit (``atexit`` handlers run), its
  signal dispositions and mask are a fresh interpreter's, its output goes to its log.

The server's own objects (its imports') are frozen (``gc.freeze``) before the first fork:
the runs' collections, the one at exit above all, leave them alone instead of walking
them (and copying every page they touch); ``gc.get_objects()`` in a run does not list them.

The server is a child subreaper: what a run leaves is re-parented to it and killed
after the run; the processes forked from a run carry the server's marker in
``/proc/PID/environ`` (verify sweeps it, sparing the server), those it execs the run's.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import sys
import threading

PREFIX = "NPU_MIGRATE_VERIFY_"


#: the temporary directory each run gets in the scratch (twins.py): read when a run asks for
#: one (``tempfile`` computes it on first use; :func:`become_run` forgets the server's)
_TEMP_VARIABLES = frozenset({"TMPDIR", "TMP", "TEMP"})


def _own(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(PREFIX) and k not in _TEMP_VARIABLES}


def shadowed(dirs: list[str]) -> list[str]:
    """Entries of ``dirs`` named like a top-level module this process imported."""
    names = {name.partition(".")[0] for name in sys.modules}
    out = []
    for folder in dirs:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            stem = entry.split(".", 1)[0]
            if stem in names and (entry == stem or entry.endswith((".py", ".pyc", ".so", ".pth"))):
                out.append(os.path.join(folder, entry))
    return out


def native_threads() -> int:
    """Threads of this process, Python's and native ones (/proc/self/task)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def why_fresh(request: dict, base: dict[str, str], threads: int = -1) -> str | None:
    if _own(request["env"]) != _own(base):
        changed = sorted(set(_own(request["env"]).items()) ^ set(_own(base).items()))
        return f"the environment differs from the server's: {sorted({k for k, _ in changed})[:5]}"
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads in the server"
    # At most the native pools the imports started (OpenBLAS's server, which its own fork
    # handler stops before the first fork: one thread from then on).
    if native_threads() > threads:
        return f"{native_threads()} threads in the server, {threads} after its imports"
    script_dir = os.path.dirname(os.path.abspath(os.path.join(request["cwd"], request["argv"][0])))
    hidden = shadowed([request["cwd"], script_dir])
    if hidden:
        return f"{hidden[0]} has the name of a module the server imported"
    return None


def send(conn: socket.socket, data: dict) -> None:
    conn.sendall((json.dumps(data) + "\n").encode())


def receive(conn: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise EOFError
        data += chunk
    return json.loads(data)


def serve(path: str):
    """Serve runs; returns only in a forked run: (request, connection)."""
    from npu_migrate.verify import supervise

    supervise._prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)
    base = dict(os.environ)  # what the runs' environments are compared with: before the imports
    import torch
    import torch._dynamo  # noqa: F401 - torch.optim imports it at the first step

    from npu_migrate.verify import entry, hook, spawned  # noqa: F401

    # What the imports set (torch._dynamo: TORCHINDUCTOR_CACHE_DIR, a fixed per-user path
    # that a fresh run sets at its first optimizer step): given to every run as well.
    imported = {k: v for k, v in os.environ.items() if base.get(k) != v}
    # The imports' objects live as long as the server: out of the collector's reach, so that
    # no run's collections (its last one at exit above all) walk them and copy their pages
    # (about 0.7 s of CPU per run, measured; gc.freeze's documented use before fork).
    gc.collect()
    gc.freeze()
    threads = native_threads()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    server.listen(4)
    os.rename(path + ".tmp", path)  # ready
    while True:
        conn, _ = server.accept()
        try:
            request = receive(conn)
        except (EOFError, ValueError):
            conn.close()
            continue
        reason = why_fresh(request, base, threads)
        if reason is not None:
            send(conn, {"fresh": reason})
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            server.close()
            request["env"] = dict(request["env"], **imported)
            return request, conn
        try:
            send(conn, {"pid": pid})
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
        supervise.kill_tree()  # what the run left, re-parented here
        try:
            send(conn, {"status": os.waitstatus_to_exitcode(status)})
        except OSError:
            pass
        conn.close()


def become_run(request: dict, conn: socket.socket) -> list[str]:
    """In the forked run: a fresh interpreter's state for what the run can see."""
    from npu_migrate.verify import supervise

    conn.close()
    supervise._prctl(supervise.PR_SET_CHILD_SUBREAPER, 0)
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import tempfile

    tempfile.tempdir = None  # the run's TMPDIR (its scratch), not what the server's imports found
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    return request["argv"]


if __name__ == "__main__":
    forked = serve(sys.argv[1])
    argv = become_run(*forked)
    from npu_migrate.verify import entry

    sys.exit(entry.main(argv))  # the interpreter's own exit: the script's atexit handlers run
