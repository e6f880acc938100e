"""The checkpoint directory: names, publishing a finished checkpoint, pruning.

::

    step-0000000500/        a complete checkpoint (never visible half-written)
    step-0000000500.1/      the same step saved again, while it replaces step-0000000500
    latest                  "step-0000000500\\n" (for people and scripts; never read back)
    .tmp-step-...           a save in progress, or one killed mid-way (random names)
    .trash-...              a checkpoint being deleted
    .npu_runtime.lock       held (fcntl) by the one job that saves here

Every change to what is visible is one ``rename``: a kill at any moment leaves every
complete checkpoint that was visible before, or its replacement, visible. Deleting is
a rename to ``.trash-*`` followed by removal on a background thread (removing a large
checkpoint can take as long as writing one). The removals are waited for before a failed
save raises, and at exit (``EXIT_SETTLE_S`` in all): the threads are daemons and would
die with the process, leaving ``.trash-*`` behind. One cut short (past that bound, or by
``os._exit``) is finished by the next save.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable

from . import durable

LATEST = "latest"
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
_STEP_RE = re.compile(r"^step-(\d+)(?:\.(\d+))?$")


def step_dirname(step: int, generation: int = 0) -> str:
    name = f"step-{step:010d}"
    return f"{name}.{generation}" if generation else name


def parse_name(name: str) -> tuple[int, int] | None:
    """(step, generation) of a checkpoint directory name, else None."""
    m = _STEP_RE.match(name)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def listing(directory: str) -> list[tuple[int, int, str]]:
    """(step, generation, name) of visible checkpoint directories, newest first. Only
    real directories count: files and symlinks with checkpoint names are ignored."""
    out = []
    with os.scandir(directory) as entries:
        for entry in entries:
            key = parse_name(entry.name)
            if key:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        out.append((*key, entry.name))
    return sorted(out, reverse=True)


LOCK = ".npu_runtime.lock"
_locks: dict[tuple[int, int], int] = {}
_locks_guard = threading.Lock()


def holds_lock(directory: str) -> bool:
    """Does this process hold ``directory``'s save lock?"""
    try:
        st = os.stat(directory)
    except OSError:
        return False
    with _locks_guard:
        return (st.st_dev, st.st_ino) in _locks


def lock_for_saving(directory: str) -> None:
    """Hold the directory's save lock for the rest of this process, or raise
    CheckpointError when another process holds it: two jobs saving into one directory
    would prune each other's saves in progress. A POSIX record lock (``lockf``): the
    kernel drops it when the process ends however it ends, and forked children (data
    loader workers that outlive a killed rank) do not inherit it."""
    from .errors import CheckpointError

    st = os.stat(directory)
    key = (st.st_dev, st.st_ino)
    with _locks_guard:
        if key in _locks:
            return
        path = os.path.join(directory, LOCK)
        nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | nofollow, 0o644)
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot open the checkpoint directory's lock file "
                                  f"({exc.strerror or exc}; a symlink or someone else's file is refused)") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CheckpointError(f"{path}: the lock file is not a regular file")
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    raise CheckpointError(
                        f"another process is saving checkpoints into {directory} (it holds {path}): two jobs "
                        "must not share a checkpoint directory; give each its own") from None
                raise CheckpointError(f"{path}: cannot lock ({exc.strerror or exc})") from None
        except BaseException:
            os.close(fd)
            raise
        _locks[key] = fd


_removals: list[threading.Thread] = []


def _remove_later(path: str) -> None:
    thread = threading.Thread(target=shutil.rmtree, args=(path, True), name="npu_runtime-prune", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # the interpreter is shutting down: remove it now
        shutil.rmtree(path, ignore_errors=True)
        return
    _removals.append(thread)


#: At exit, the background removals get this long in all to finish (``settle``).
EXIT_SETTLE_S = 60.0


def settle(timeout: float | None = None) -> bool:
    """Wait for the background removals started so far, at most ``timeout`` seconds in
    all (None: for as long as they take); True when none is left running."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _removals:
        thread = _removals[-1]
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            return False
        with contextlib.suppress(ValueError):  # another thread's settle() took it first
            _removals.remove(thread)
    return True


def _discard(directory: str, name: str, tag: str) -> None:
    """Make ``name`` disappear atomically (rename), then delete it in the background."""
    trash = os.path.join(directory, f"{TRASH_PREFIX}{name}-{tag}")
    try:
        os.replace(os.path.join(directory, name), trash)
    except OSError:
        return
    _remove_later(trash)


def publish(directory: str, tmp: str, step: int, tag: str) -> str:
    """Rename the finished ``tmp`` into place as checkpoint ``step``; returns its name.

    Saving a step that already exists: the new one becomes visible under the next
    generation (``step-N.g``, preferred by loading) before the old one is renamed away,
    and only then takes the plain name.
    """
    final = step_dirname(step)
    same = [(g, name) for s, g, name in listing(directory) if s == step]
    if not same:
        os.replace(tmp, os.path.join(directory, final))
        return final
    interim = step_dirname(step, max(g for g, _ in same) + 1)
    os.replace(tmp, os.path.join(directory, interim))
    durable.fsync_dir(directory)
    for _g, name in same:
        _discard(directory, name, tag)
    os.replace(os.path.join(directory, interim), os.path.join(directory, final))
    return final


def prepare_latest(directory: str, name: str, tag: str) -> str:
    """Write the next ``latest`` beside it (to be synced, then renamed into place)."""
    tmp = os.path.join(directory, f"{TMP_PREFIX}{LATEST}-{tag}")
    durable.write_text(tmp, name + "\n")
    return tmp


def install_latest(directory: str, prepared: str) -> None:
    os.replace(prepared, os.path.join(directory, LATEST))


def read_latest(directory: str) -> str | None:
    """The name ``latest`` records (for people and scripts; loading never reads it).
    A ``latest`` that is not a small regular file counts as absent."""
    from . import safeio
    from .errors import CheckpointError

    try:
        dfd = safeio.open_dir(directory)
    except CheckpointError:
        return None
    try:
        return safeio.read_small(dfd, LATEST, shown=LATEST, max_size=4096).decode("utf-8").strip() or None
    except (CheckpointError, UnicodeDecodeError):
        return None
    finally:
        os.close(dfd)


def prune(directory: str, keep: int, is_good: Callable[[str], bool], tag: str,
          spare: Callable[[str], bool] = lambda name: False) -> list[str]:
    """Keep the ``keep`` newest checkpoints known to be good, and everything newer
    than the oldest of them; delete what is older. Checkpoints never verified, or found
    corrupt, do not count: a verified checkpoint is never deleted in favour of them.
    Leftover ``.tmp-*``/``.trash-*`` entries (killed saves) go too, except ``spare``."""
    removed = []
    good = 0
    for _step, _gen, name in listing(directory):
        if good >= keep:
            _discard(directory, name, tag)
            removed.append(name)
        elif is_good(name):
            good += 1
    for name in os.listdir(directory):
        if name.startswith((TMP_PREFIX, TRASH_PREFIX)) and not spare(name):
            full = os.path.join(directory, name)
            if os.path.isdir(full) and not os.path.islink(full):
                if name.startswith(TMP_PREFIX):  # hide it first: a stale save never looks current
                    hidden = os.path.join(directory, f"{TRASH_PREFIX}{name}-{tag}")
                    with contextlib.suppress(OSError):
                        os.replace(full, hidden)
                        full = hidden
                _remove_later(full)
            else:
                with contextlib.suppress(OSError):
                    os.remove(full)
    return removed
