"""In-place writes: never a partial file, never a lost edit, no litter.

* The new bytes go to a temp file next to the target (same file system), are
  fsync'd and given the target's mode, then ``os.replace`` swaps them in; a
  symlink keeps pointing where it pointed (its target is replaced).
* Right before the swap the target must still hold the bytes the migration was
  computed from (their digest). A file edited since it was read is left as it
  is (:class:`npu_migrate.pipeline.files.ReadError`, one line): the user's edit wins.
* Temp files are named ``.npu-migrate-*.tmp`` and hold an ``flock`` for their
  whole life. A run killed by SIGKILL leaves its temp file behind, but not the
  lock, so a later run removes such files (:func:`remove_leftovers`) and never
  one whose writer is still running (a concurrent run).
* With ``roots`` (``--write`` passes the project root and the paths it was given:
  a directory, or a named file's directory), a file whose real path leaves them
  all (a symlink such as ``launch/x.sh -> ../../home/.bashrc``) is not
  written: :class:`Refused`, one line, the run's exit code 2.
* Hard links are reported and skipped, not split: ``os.replace`` gives the name
  a new inode, so the file's other names would keep the old (CUDA) text and
  ``--check`` would fail on them; writing in place through the inode cannot be
  atomic. A file with more than one link is :class:`Refused` (one line, exit 2)
  and left as it is; break the link (``cp --remove-destination``) to migrate it.
* A Ctrl-C (or SIGTERM, SIGHUP) cannot fall between the swap and its entry in
  :data:`written`, so the CLI can say exactly how many files were written before
  it stopped, nor between a temp file's creation and the clean-up that removes it.
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from npu_migrate.pipeline.files import read_unchanged

try:
    import fcntl
except ImportError:  # not POSIX: no locks, and no clean-up of other runs' temp files
    fcntl = None

TEMP_PREFIX, TEMP_SUFFIX = ".npu-migrate-", ".tmp"

#: Migrated sources written by this process (writes with a digest), in order; the CLI
#: clears it at the start of a run.
written: list[str] = []


def is_temp_name(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


class Refused(Exception):
    """A write that would follow a link out of the project or split a hard link;
    ``str()`` is the one-line message naming the file."""


def inside(path: str, root: str) -> bool:
    """Whether the real path ``path`` is ``root`` (a real path) or below it."""
    return os.path.commonpath([path, root]) == root


def write_atomic(path: str, data: bytes, digest: str | None = None, new_mode: int | None = None,
                 roots: Iterable[str] | None = None) -> None:
    """Replace the contents of ``path`` with ``data``, if it still has the bytes with
    ``digest`` (None: whatever it has). Raises ReadError, Refused or OSError, writing
    nothing. Without ``new_mode`` the file must exist; with it, a missing file is
    created with that mode (less the umask). With ``roots`` (real paths), a file whose
    real path is outside all of them, or that has other hard links, is refused."""
    if digest is not None:
        read_unchanged(path, digest)  # gone, not a regular file, or edited: fail before any temp file
    target = os.path.realpath(path)  # keep symlinks pointing where they pointed
    if roots is not None:
        roots = tuple(roots)
        _check_target(path, target, roots)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        if new_mode is None:
            raise
        mode = new_mode & ~_umask()
    fd, tmp = -1, None
    try:
        with interrupt_deferred():  # a signal cannot fall between the temp file's creation and its name
            fd, tmp = _locked_temp(os.path.dirname(target) or ".")
        with os.fdopen(fd, "wb") as handle:  # closing it releases the lock: after the swap
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            if digest is not None:
                read_unchanged(path, digest)  # again, as late as possible
            if roots is not None and os.path.realpath(path) != target:  # a link swapped meanwhile
                raise Refused(f"{path}: its symbolic link changed during the run; not written (skipped)")
            with interrupt_deferred():
                os.replace(tmp, target)
                if digest is not None:  # a migrated source, not a report or a new file
                    written.append(path)
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)  # gone already if the swap was done
            except OSError:
                pass
            try:
                os.close(fd)  # closed already unless the signal came before fdopen
            except OSError:
                pass
        raise


def _check_target(path: str, target: str, roots: tuple[str, ...]) -> None:
    if not any(inside(target, root) for root in roots):
        raise Refused(f"{path}: symbolic link to {target}, outside the project; not written (skipped)")
    try:
        links = os.stat(target).st_nlink
    except FileNotFoundError:
        return
    if links > 1:
        raise Refused(f"{path}: has {links} hard links; not written (skipped): replacing it would split them and "
                      "leave the old text under the other names; break the link to migrate it")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _locked_temp(directory: str, attempts: int = 10) -> tuple[int, str]:
    """A new temp file in ``directory``, open and locked (see :func:`remove_leftovers`)."""
    for _ in range(attempts):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        if fcntl is None:
            return fd, tmp
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.path.samestat(os.fstat(fd), os.stat(tmp)):
                return fd, tmp
        except OSError:
            pass  # a concurrent clean-up took it between mkstemp and flock: it removes it
        os.close(fd)
    raise OSError(f"could not create a temp file in {directory}")


def remove_leftovers(paths: Iterable[str]) -> int:
    """Remove the temp files among ``paths`` whose writer is gone (nobody holds their
    lock); leave the others. How many were removed."""
    if fcntl is None:
        return 0
    removed = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and os.path.samestat(info, os.lstat(path)):
                os.unlink(path)
                removed += 1
        except OSError:
            pass  # locked: its writer is still running
        finally:
            os.close(fd)
    return removed


#: The signals that end a run as Ctrl-C does (SIGHUP: the terminal was closed).
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, taken as Ctrl-C is (npu_migrate/cli/app.py installs the handler)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def raise_terminated(signum, frame) -> None:
    raise Terminated(signum)


@contextmanager
def interrupt_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done, then go to the handler
    they would have gone to."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {}
    try:
        for signum in ENDING_SIGNALS:
            previous[signum] = signal.signal(signum, lambda signum, frame: received.append(signum))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)
