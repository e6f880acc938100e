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
    if _special(target):
        with open(target, "wb") as handle:
            handle.write(data)
        return
    write_atomic(path, data, new_mode=0o666)  # a locked temp file: see npu_migrate/pipeline/writer.py
