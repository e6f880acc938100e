"""Unified diffs (difflib, coloured by rich on a terminal).

Diffs go to stdout, so ``npu-migrate src > migration.patch`` gives a patch that
``git apply`` accepts, byte for byte. Reports (findings, the summary, machine
formats) are ``npu_migrate/reporting/``.
"""

from __future__ import annotations

import difflib
import io
import itertools
import os

from rich.console import Console
from rich.text import Text

_STYLES = {"+": "green", "-": "red", "@": "cyan"}


#: How git writes these bytes inside a quoted path (``quote_c_style``); others need ``\ooo``.
_GIT_ESCAPES = {7: b"\\a", 8: b"\\b", 9: b"\\t", 10: b"\\n", 11: b"\\v", 12: b"\\f", 13: b"\\r",
                0x22: b'\\"', 0x5C: b"\\\\"}


def git_quoted(name: bytes) -> bytes:
    """A path as git writes it in a diff header (``core.quotePath``, its default): in
    double quotes with C escapes if it holds a control character, a quote, a
    backslash or a non-ASCII byte; a name with a space gets a trailing tab."""
    tab = b"\t" if b" " in name else b""
    if not any(byte < 0x20 or byte >= 0x7F or byte in (0x22, 0x5C) for byte in name):
        return name + tab
    quoted = bytearray(b'"')
    for byte in name:
        if byte in _GIT_ESCAPES:
            quoted += _GIT_ESCAPES[byte]
        elif byte < 0x20 or byte >= 0x7F:
            quoted += b"\\%03o" % byte
        else:
            quoted.append(byte)
    return bytes(quoted) + b'"' + tab


def unified_diff(path: str, old: bytes | None, new: bytes) -> bytes:
    """A git-style diff of the file's bytes, as ``git apply`` reads them: lines end at
    ``\\n`` only (a ``\\r`` stays in its line, so CRLF and CR-only files round-trip,
    and so do form feeds, ``\\x1c`` and U+2028), in the file's own encoding.
    ``old=None`` is a new file (``--- /dev/null``)."""
    name = os.fsencode(path).lstrip(b"/")
    lines = difflib.diff_bytes(
        difflib.unified_diff, io.BytesIO(old or b"").readlines(), io.BytesIO(new).readlines(), lineterm=b"\n"
    )
    source = b"/dev/null" if old is None else git_quoted(b"a/" + name)
    out = [b"--- " + source + b"\n", b"+++ " + git_quoted(b"b/" + name) + b"\n"]
    for line in itertools.islice(lines, 2, None):  # difflib's own ---/+++ lines
        out.append(line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n")
    return b"".join(out) if len(out) > 2 else b""


def print_diff(console: Console, diff: bytes) -> None:
    """Coloured on a terminal; anywhere else, the diff's bytes exactly (a patch)."""
    if not console.is_terminal:
        console.file.flush()
        buffer = getattr(console.file, "buffer", None)
        if buffer is not None:
            buffer.write(diff)
            buffer.flush()
        else:
            console.file.write(diff.decode("utf-8", "replace"))
        return
    for line in diff.decode("utf-8", "replace").split("\n")[:-1]:
        style = "bold" if line.startswith(("---", "+++")) else _STYLES.get(line[:1])
        console.print(Text(line.rstrip("\r"), style=style or ""), soft_wrap=True, highlight=False)
