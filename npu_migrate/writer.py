"""Atomic writes: never a partial file; an existing file keeps its mode, a new one gets ``new_mode``."""

from __future__ import annotations

import os
import stat
import tempfile


def write_atomic(path: str, data: bytes, new_mode: int | None = None) -> None:
    """Replace ``path`` with ``data``. Without ``new_mode`` the file must exist; with it,
    a missing file is created with that mode (less the umask)."""
    target = os.path.realpath(path)  # keep symlinks pointing where they pointed
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        if new_mode is None:
            raise
        mode = new_mode & ~_umask()
    directory = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".npu-migrate-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
