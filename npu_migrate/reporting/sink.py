"""Where reports go: ``--output-file`` and ``--report``.

Both paths are checked before any file is read or written (:func:`check`), so a
typo in a report path costs one line and exit 2, not a migrated tree without its
report. Reports are written atomically (a temp file beside the target, then
``os.replace``); a target that exists and is not a regular file (``/dev/stdout``,
a FIFO) is written in place.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_TEMP_PREFIX = ".npu-migrate-report-"


class OutputPathError(Exception):
    """A report cannot be written there; the message is one line."""


def _special(path: Path) -> bool:
    return path.exists() and not path.is_file() and not path.is_dir()


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
        return
    parent = target.parent
    if not parent.exists():
        raise fail(f"no such directory: {parent}")
    if not parent.is_dir():
        raise fail(f"not a directory: {parent}")
    if target.exists() and not os.access(target, os.W_OK):
        raise fail("permission denied")
    try:  # the only sure test that the report can be created there (read-only mounts, /proc, ...)
        fd, probe = tempfile.mkstemp(dir=parent, prefix=_TEMP_PREFIX, suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise fail(f"cannot create a file in {parent}: {exc.strerror or exc}") from None


def write(path: str, text: str) -> None:
    target = Path(path)
    data = text.encode("utf-8")
    if _special(target):
        with open(target, "wb") as handle:
            handle.write(data)
        return
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TEMP_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
