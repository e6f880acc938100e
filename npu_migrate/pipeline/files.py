"""Reading the files we migrate, safely on a file system that changes under us.

* Only regular files are read. A FIFO named ``x.py`` would block ``open`` and
  ``read`` forever, so files are opened with ``O_NONBLOCK`` (no effect on a
  regular file) and checked with ``fstat`` before the first read.
* Every migration remembers the digest of the bytes it was computed from, and
  nothing is shown or written for a file that no longer has those bytes: a dry
  run does not show a diff against other content, and ``--write`` never
  replaces an edit the user made while the run was going
  (:func:`npu_migrate.pipeline.writer.write_atomic` checks again right before replacing).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tokenize


class ReadError(Exception):
    """A file could not be read; ``str()`` is the one-line message, naming the file."""


def decode_text(data: bytes) -> str:
    """The text of a source file (its coding cookie or UTF-8; latin-1 when that fails)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("latin-1")


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def nonblocking(path: str, flags: int) -> int:
    """An ``opener`` for ``open()`` that cannot block on a FIFO (no effect on a regular file)."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def read_regular(path: str) -> bytes:
    """The bytes of ``path``; :class:`ReadError` if it is missing, unreadable or not a regular file."""
    try:
        with open(path, "rb", opener=nonblocking) as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise ReadError(f"{path}: {kind(mode)}, not a regular file; skipped")
            return handle.read()
    except FileNotFoundError:
        raise ReadError(f"{path}: no such file (deleted during the run?)") from None
    except PermissionError:
        raise ReadError(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise ReadError(f"{path}: is a directory") from None
    except OSError as exc:
        raise ReadError(f"{path}: cannot read: {exc.strerror or exc}") from None


def changed_message(path: str) -> str:
    return f"{path}: changed on disk while npu-migrate was running; left as it is now (run npu-migrate again)"


def read_unchanged(path: str, digest: str | None) -> bytes:
    """The bytes of ``path``, which must still be those with ``digest`` (None: anything goes)."""
    data = read_regular(path)
    if digest is not None and content_digest(data) != digest:
        raise ReadError(changed_message(path))
    return data
