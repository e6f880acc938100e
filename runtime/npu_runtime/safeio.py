"""Opening and creating files in a directory that someone else may also write to.

A checkpoint directory is often shared (a cluster file system, a world-writable scratch
directory), so every name in it is treated as possibly planted:

- **Reading** (:func:`open_regular`): each path component is opened relative to the
  previous one with ``O_NOFOLLOW`` (a symlinked file *or directory* is refused), the file
  with ``O_NONBLOCK`` (a FIFO cannot block ``open()``), then ``fstat`` must show a
  regular file whose size is what the manifest says (or under a cap) *before* a byte is
  read: a symlink to ``/dev/zero``, a device, a FIFO or a huge file never reaches a read
  loop. Reads are of exactly that many bytes, so a read loop always ends.
- **Creating** (:func:`create_exclusive`): ``O_CREAT|O_EXCL|O_NOFOLLOW`` with a random
  name from the caller: a planted name is an error, never a file written through.
- **Trusting** (:func:`check_private`): data that is unpickled by code we do not control
  (``torch.distributed.checkpoint``'s ``.metadata``) is read only from files and
  directories owned by this user (or root) that nobody else can write.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator

from .errors import CheckpointError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _open_error(path: str, exc: OSError) -> CheckpointError:
    if exc.errno == errno.ELOOP:
        return CheckpointError(f"{path}: is a symlink (refused: checkpoint files must be regular files)")
    if exc.errno == errno.ENOTDIR:
        return CheckpointError(f"{path}: a path component is not a directory (or is a symlink)")
    return CheckpointError(f"{path}: {exc.strerror or exc}")


def open_dir(path: str, *, dir_fd: int | None = None) -> int:
    """A directory fd for ``path`` (one component when ``dir_fd`` is given), refusing a
    symlink."""
    try:
        return os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise _open_error(path, exc) from None


def _components(rel: str) -> list[str]:
    parts = rel.split("/")
    if os.path.isabs(rel) or any(p in ("", ".", "..") for p in parts):
        raise CheckpointError(f"{rel!r}: not a plain relative path")
    return parts


def open_regular(root_fd: int, rel: str, *, shown: str, size: int | None = None,
                 max_size: int | None = None) -> tuple[int, os.stat_result]:
    """Open ``rel`` under the directory ``root_fd`` for reading without following a link
    anywhere; returns (fd, stat). Raises CheckpointError (never blocks) unless it is a
    regular file of exactly ``size`` bytes (or at most ``max_size``). ``shown``: the
    path for messages."""
    parts = _components(rel)
    fds: list[int] = []
    try:
        parent = root_fd
        for part in parts[:-1]:
            parent = open_dir(part, dir_fd=parent)
            fds.append(parent)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=parent)
        except OSError as exc:
            raise _open_error(shown, exc) from None
    finally:
        for d in fds:
            os.close(d)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{shown}: is {_kind(st.st_mode)} (refused: checkpoint files must be regular files)")
        if size is not None and st.st_size != size:
            raise CheckpointError(f"{shown}: size {st.st_size} != {size} in manifest (truncated or replaced?)")
        if max_size is not None and st.st_size > max_size:
            raise CheckpointError(f"{shown}: {st.st_size} bytes, more than the {max_size} allowed")
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_exactly(fd: int, size: int, chunk: int) -> Iterator[bytes]:
    """The ``size`` bytes of ``fd`` in blocks; CheckpointError if the file ends early or
    goes on past ``size`` (it changed since it was checked). Every block yielded is
    progress: a read returning nothing ends the loop."""
    left = size
    while left > 0:
        block = os.read(fd, min(chunk, left))
        if not block:
            raise CheckpointError(f"file ended {left} bytes early (truncated while read?)")
        left -= len(block)
        yield block
    if os.read(fd, 1):
        raise CheckpointError(f"file grew past its {size} bytes while read")


def read_small(root_fd: int, rel: str, *, shown: str, max_size: int) -> bytes:
    fd, st = open_regular(root_fd, rel, shown=shown, max_size=max_size)
    try:
        return b"".join(read_exactly(fd, st.st_size, max(st.st_size, 1)))
    except CheckpointError as exc:
        raise CheckpointError(f"{shown}: {exc}") from None
    finally:
        os.close(fd)


def check_private(st: os.stat_result, shown: str) -> None:
    """Raise CheckpointError unless ``st`` belongs to this user (or root) and nobody
    else can write it."""
    if st.st_uid not in (os.geteuid(), 0):
        raise CheckpointError(f"{shown}: owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}): "
                              "a sharded checkpoint holds pickled metadata and is only loaded from files this "
                              "user wrote")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CheckpointError(f"{shown}: writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): "
                              "a sharded checkpoint holds pickled metadata and is only loaded from files nobody "
                              "else can change")


def create_exclusive(path: str, mode: int = 0o644) -> int:
    """A new file for writing: fails if the name exists, whatever it is (a planted file
    or symlink is never written through)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
