"""Where reports go: ``--output-file`` and ``--report``.

Both paths are checked before any file is read or written (:func:`check`), so a
typo in a report path costs one line and exit 2, not a migrated tree without its
report. Reports are written atomically (a temp file beside the target, then
``os.replace``); a target that exists and is not a regular file (``/dev/stdout``,
a pipe, ``/dev/null``) is written in place. Such a target is opened by :func:`check`
without blocking and held open until :func:`write`: a FIFO that nobody reads would
block the open forever (the run then never ended), so it is refused with one line,
as a socket is; opening it once to check and again to write would end a reader's
input (``cat fifo``) between the two.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

_TEMP_PREFIX = ".npu-migrate-report-"


class OutputPathError(Exception):
    """A report cannot be written there; the message is one line."""


#: special targets opened by :func:`check`, by path, for :func:`write`
_held: dict[str, int] = {}


def _special(path: Path) -> bool:
    return path.exists() and not path.is_file() and not path.is_dir()


def _open_special(path: str) -> int:
    """A descriptor to write a non-regular target, opened without blocking (a FIFO with no
    reader is ENXIO at once instead of a wait for one), then made blocking for the write."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.set_blocking(fd, True)
    except OSError:
        os.close(fd)
        raise
    return fd


def _special_reason(path: str, exc: OSError) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISSOCK(mode):
        return "a socket, not a file a report can be written to"
    if stat.S_ISFIFO(mode) and exc.errno == errno.ENXIO:
        return "a FIFO that nobody reads (writing the report would wait forever)"
    return exc.strerror or str(exc)


def check(path: str, option: str) -> None:
    """Raise :class:`OutputPathError` unless a report can be written to ``path``."""
    target = Path(path)

    def fail(reason: str) -> OutputPathError:
        return OutputPathError(f"{option} {path}: {reason}")

    if target.is_dir():
        raise fail("is a directory")
    if _special(target):
        if not os.access(target, os.W_OK):
            raise fail("permission denied")
        if path not in _held:
            try:
                _held[path] = _open_special(path)
            except OSError as exc:
                raise fail(_special_reason(path, exc)) from None
        return
    parent = target.parent
    if not parent.exists():
        raise fail(f"no such directory: {parent}")
    if not parent.is_dir():
        raise fail(f"not a directory: {parent}")
    if target.exists() and not os.access(target, os.W_OK):
        raise fail("permission denied")
    from npu_migrate.pipeline.writer import interrupt_deferred

    try:  # the only sure test that the report can be created there (read-only mounts, /proc, ...)
        with interrupt_deferred():  # a SIGTERM/SIGHUP/Ctrl-C waits until the probe is gone again
            fd, probe = tempfile.mkstemp(dir=parent, prefix=_TEMP_PREFIX, suffix=".tmp")
            os.close(fd)
            Path(probe).unlink(missing_ok=True)  # a concurrent run's clean-up may have taken it
    except OSError as exc:
        raise fail(f"cannot create a file in {parent}: {exc.strerror or exc}") from None


def write(path: str, text: str) -> None:
    from npu_migrate.pipeline.writer import write_atomic

    target = Path(path)
    data = text.encode("utf-8")
    fd = _held.pop(path, None)
    if fd is None and _special(target):
        try:
            fd = _open_special(path)
        except OSError as exc:
            raise OSError(exc.errno, _special_reason(path, exc)) from None
    if fd is not None:
        with open(fd, "wb") as handle:
            handle.write(data)
        return
    write_atomic(path, data, new_mode=0o666)  # a locked temp file: see npu_migrate/pipeline/writer.py
