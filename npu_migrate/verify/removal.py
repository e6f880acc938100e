"""verify's scratch directory: made with its maker's pid in its name, removed whatever
the twins left in it, and swept by the next verify when its maker was killed.

A verify ended by SIGKILL (the OOM killer, a CI job's timeout) runs no code: its scratch
directory, two copies of the project, stayed in the temporary directory. Its name
carries the pid namespace and pid of the verify that made it
(``npu-migrate-verify-<ns>.<pid>-XXXX``), so the next verify removes those of makers
that are gone (``sweep``); a ``--keep`` directory is named ``npu-migrate-verify-keep-*``
and never swept.

``shutil.rmtree`` does the work. What it cannot remove is what a twin can make of its
copy: on Python < 3.13 it recurses once per directory level, so a tree 3,000
directories deep ends it with ``RecursionError`` (a traceback, and the scratch left
behind), and a directory the twin made unreadable or read-only (``chmod 000``) stops it
for any user but root. For those, the second pass moves every directory up to the top
of the scratch directory (a rename within it), so no tree is ever deeper than two
levels, makes each directory its own (mode 700) before it empties it, and works with
directory descriptors and single names only (no path grows past ``PATH_MAX``): at
most two descriptors are open at any time.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import stat
import tempfile
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)

PREFIX = "npu-migrate-verify-"


def make_scratch(keep: bool = False) -> Path:
    """A new private scratch directory in the temporary directory, after sweeping those
    of verify runs that were killed."""
    sweep()
    from npu_migrate._runtime.own_dirs import pid_namespace

    prefix = f"{PREFIX}keep-" if keep else f"{PREFIX}{pid_namespace()}.{os.getpid()}-"
    return Path(tempfile.mkdtemp(prefix=prefix)).resolve()


def sweep(directory: str | None = None) -> list[str]:
    """Remove the scratch directories (``<PREFIX><ns>.<pid>-*``) of ``directory`` (the
    temporary one) that this user made in this pid namespace and whose maker no longer
    runs; the paths removed. Another user's, another pid namespace's (a container
    sharing the directory: its pids are not this one's), a live maker's and a link are
    never touched (the runtime's own sweep, with :func:`remove_tree`)."""
    from npu_migrate._runtime.own_dirs import sweep as sweep_own

    return sweep_own(PREFIX, directory, remove=remove_tree)


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove the directory ``path`` and everything below it; True when it is gone."""
    path = os.fspath(path)
    with contextlib.suppress(RecursionError, MemoryError):
        shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        with contextlib.suppress(OSError):
            _flatten_and_remove(path)
    return not os.path.lexists(path)


def _flatten_and_remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
    top = os.open(path, _DIR_FLAGS)
    try:
        names = itertools.count()
        pending: list[str | None] = [None]  # directories directly in ``top``; None is ``top``
        while pending:
            name = pending.pop()
            if name is None:
                _empty(top, top, pending, names)
                continue
            _make_own(name, top)
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=top)
            except OSError:
                continue
            try:
                _empty(fd, top, pending, names)
            finally:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def _empty(fd: int, top: int, pending: list[str | None], names: itertools.count) -> None:
    """Unlink what ``fd`` holds; move its directories into ``top`` and queue them."""
    with os.scandir(fd) as entries:
        listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in listed:
        try:
            if not is_dir:
                os.unlink(name, dir_fd=fd)
            elif fd == top:
                pending.append(name)
            else:
                pending.append(_move_up(name, fd, top, names))
        except OSError:
            continue


def _move_up(name: str, fd: int, top: int, names: itertools.count) -> str:
    _make_own(name, fd)  # a directory moves to another parent only if it is writable
    while True:
        new = f".npu-migrate-removing-{next(names)}"
        try:
            os.rename(name, new, src_dir_fd=fd, dst_dir_fd=top)
            return new
        except OSError as exc:  # the name is taken (by the twin, or a file): the next one
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise


def _make_own(name: str, dir_fd: int) -> None:
    """Mode 700 for the directory ``name`` of ``dir_fd``, never for what a link there
    leads to (a name swapped for a link after it was listed): on Linux through an
    ``O_PATH`` descriptor of the directory itself (``O_DIRECTORY`` refuses a link)."""
    with contextlib.suppress(OSError):
        if not hasattr(os, "O_PATH") or not os.path.isdir("/proc/self/fd"):
            os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd)
            return
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IRWXU)
        finally:
            os.close(fd)
