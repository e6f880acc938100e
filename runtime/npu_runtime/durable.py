"""Writing files so that they survive a crash, and checking them when they are read back.

- :class:`DurableWriter` is the file object ``torch.save`` writes into: it counts the
  bytes, feeds the watchdog as they go, computes a crc32 only when torch's own zip
  records carry none, and keeps the ``OSError`` of a failed write (torch turns it into
  an opaque ``RuntimeError: [enforce fail at inline_container.cc...]``).
- :func:`sync` makes a set of files and directories durable with one fsync each, all
  at once: each fsync waits for a journal commit, and running them side by side lets
  the file system serve them together instead of one commit after another.
- ``torch.save`` files are zip archives whose records carry torch's crc32: they are
  verified record by record (:func:`check_zip`), so saving does not read the data a
  second time; other files get a crc32 of their bytes (:func:`crc32_file`).
- :func:`write_failure` turns an ``OSError`` into a ``CheckpointError`` that says what
  happened (a full disk, a quota, a file-size limit) and where.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import zipfile
import zlib
from collections.abc import Iterable
from typing import Any

from . import safeio, watchdog
from .errors import CheckpointError

CHUNK = 64 << 20  # bytes between watchdog beats while writing or checking
ZIP_CRC = "zip-crc32"  # manifest marker: verified by the zip records' own crc32


def torch_writes_crc() -> bool:
    """Does ``torch.save`` put a crc32 in every zip record (the default)?"""
    try:
        from torch.utils.serialization import config
    except ImportError:  # torch < 2.6: always computed
        return True
    return bool(getattr(config.save, "compute_crc32", True))


FLUSH_EVERY = 16 << 20  # bytes written between background flushes


class DurableWriter:
    """A write-only file for ``torch.save``. Its data is durable after :func:`sync`.

    While ``torch.save`` serialises, a thread flushes what is already written to the disk
    (``fdatasync`` every :data:`FLUSH_EVERY` bytes), so the final :func:`sync` waits for
    the tail only instead of the whole file. A failed background flush is raised by
    :meth:`close` (after one, the kernel may not report the error again)."""

    def __init__(self, path: str, *, crc: bool, flush_every: int = FLUSH_EVERY) -> None:
        """``flush_every``: 0 for no background flushes."""
        self.path = path
        self.fd = safeio.create_exclusive(path)
        self.size = 0
        self.crc: int | None = 0 if crc else None
        self.error: OSError | None = None
        self._next_beat = CHUNK
        self._flush_every = flush_every
        self._next_flush = flush_every
        self._flusher: _Flusher | None = None

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self.crc is not None:
            self.crc = zlib.crc32(view, self.crc)
        done, total = 0, len(view)
        try:
            while done < total:
                done += os.write(self.fd, view[done:])
        except OSError as exc:
            self.error = self.error or exc
            raise
        self.size += total
        if self.size >= self._next_beat:
            watchdog.beat()  # the runtime's own save is a sign of life
            self._next_beat = self.size + CHUNK
        if self._flush_every and self.size >= self._next_flush:
            self._next_flush = self.size + self._flush_every
            if self._flusher is None:
                self._flusher = _Flusher(self.fd)
            self._flusher.request()
        return total

    def flush(self) -> None:
        """Data goes straight to the kernel; durability comes with :func:`sync`."""

    def close(self) -> None:
        """Close the file; raise the error of a failed background flush."""
        error = self._stop_flusher()
        self.abort()
        if error is not None:
            self.error = self.error or error
            raise error

    def abort(self) -> None:
        self._stop_flusher()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _stop_flusher(self) -> OSError | None:
        flusher, self._flusher = self._flusher, None
        return flusher.stop() if flusher is not None else None


class _Flusher:
    """A thread that runs ``fdatasync(fd)`` whenever asked, coalescing requests."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.error: OSError | None = None
        self._wanted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run, name="npu_runtime-flush", daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # interpreter shutting down: the final sync does it all
            self._thread = None

    def request(self) -> None:
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                return
            try:
                _datasync(self.fd)
            except OSError as exc:
                self.error = self.error or exc
                return

    def stop(self) -> OSError | None:
        """Wait for the flush under way (the fd must stay open until then)."""
        if self._thread is not None:
            self._stopping = True
            self._wanted.set()
            self._thread.join()
        return self.error


def _datasync(fd: int) -> None:
    """A file's data (and its size, which fdatasync counts as data: no second metadata
    write) to the disk; fsync where there is no fdatasync."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def _fsync(path: str) -> None:
    is_dir = os.path.isdir(path)
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if is_dir else 0))
    try:
        if is_dir:
            os.fsync(fd)
        else:
            _datasync(fd)
    finally:
        os.close(fd)


def sync(paths: Iterable[str]) -> None:
    """fsync every file and directory in ``paths``, side by side; raise the first error.

    Plain threads, not an executor: a background save finishing while the interpreter
    exits may not submit to one; where no thread can start, one after the other."""
    errors: list[BaseException] = []

    def one(path: str) -> None:
        try:
            _fsync(path)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(exc)

    threads = []
    for path in paths:
        thread = threading.Thread(target=one, args=(path,), name="npu_runtime-fsync", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # interpreter shutting down
            one(path)
            continue
        threads.append(thread)
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    watchdog.beat()


def fsync_dir(path: str) -> None:
    _fsync(path)


def write_text(path: str, text: str) -> None:
    """Write a new small file (not atomic, not yet durable: the caller syncs and renames
    it). The name must not exist: a planted file or symlink is an error, never followed."""
    fd = safeio.create_exclusive(path)
    try:
        data = text.encode("utf-8")
        done = 0
        while done < len(data):
            done += os.write(fd, data[done:])
    finally:
        os.close(fd)


def crc32_fd(fd: int, size: int) -> int:
    """crc32 of exactly ``size`` bytes of ``fd`` (CheckpointError if the file is shorter
    or longer). The watchdog is fed only for blocks actually read: a read loop that
    makes no progress never passes for a sign of life, and neither does reading a hole
    (a planted sparse file as large as the file system allows, with a manifest to
    match, would otherwise be checksummed for hours while the watchdog is fed)."""
    crc = 0
    pos = os.lseek(fd, 0, os.SEEK_CUR)
    for block in safeio.read_exactly(fd, size, CHUNK):
        crc = zlib.crc32(block, crc)
        if _holds_data(fd, pos, len(block)):
            watchdog.beat()
        pos += len(block)
    return crc


def _holds_data(fd: int, start: int, length: int) -> bool:
    """Whether ``[start, start + length)`` of ``fd`` holds data, not only a hole (True
    where the file system cannot tell). Leaves the file position at its end."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return True
    try:
        return os.lseek(fd, start, seek_data) < start + length
    except OSError as exc:
        return exc.errno != errno.ENXIO  # ENXIO: nothing but hole from start to the end
    finally:
        os.lseek(fd, start + length, os.SEEK_SET)


def crc32_file(path: str) -> tuple[int, int]:
    """(size, crc32) of a regular file (not through a symlink), read in chunks."""
    directory, name = os.path.split(path)
    dfd = safeio.open_dir(directory or ".")
    try:
        fd, st = safeio.open_regular(dfd, name, shown=path)
    finally:
        os.close(dfd)
    try:
        return st.st_size, crc32_fd(fd, st.st_size)
    finally:
        os.close(fd)


def check_zip(fileobj: Any, shown: str) -> None:
    """Read every record of a torch.save zip (an open binary file, already checked to be
    a regular file of the manifest's size) and check its crc32; raise CheckpointError."""
    try:
        with zipfile.ZipFile(fileobj) as zf:
            for info in zf.infolist():
                with zf.open(info) as member:  # raises BadZipFile on a crc mismatch at its end
                    while member.read(CHUNK):
                        watchdog.beat()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(f"{shown}: corrupt ({exc})") from None


def write_failure(exc: BaseException, what: str, directory: str) -> CheckpointError:
    """A CheckpointError that says why ``what`` could not be written under ``directory``."""
    cause = exc if isinstance(exc, OSError) else None
    if cause is None:
        link: BaseException | None = exc
        while link is not None and not isinstance(link, OSError):
            link = link.__cause__ or link.__context__
        cause = link
    if cause is not None and cause.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = f"{shutil.disk_usage(directory).free / 1e6:.0f} MB free"
        except OSError:
            free = "free space unknown"
        limit = "the disk is full" if cause.errno == errno.ENOSPC else "the disk quota is exhausted"
        return CheckpointError(f"{what} could not be written to {directory}: {limit} "
                               f"({os.strerror(cause.errno)}; {free})")
    if cause is not None and cause.errno == errno.EFBIG:
        return CheckpointError(f"{what} could not be written to {directory}: a file exceeds the file-size limit "
                               f"(ulimit -f) ({os.strerror(cause.errno)})")
    if cause is not None:
        return CheckpointError(f"{what} could not be written to {directory}: "
                               f"{cause.strerror or cause} ({getattr(cause, 'filename', None) or directory})")
    return CheckpointError(f"{what} could not be written to {directory}: {type(exc).__name__}: {exc}")
