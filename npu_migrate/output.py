"""Unified diffs (difflib, coloured by rich on a terminal).

Diffs go to stdout, so ``npu-migrate src > migration.patch`` gives a patch that
``git apply`` accepts. Reports (findings, the summary, machine formats) are
``npu_migrate/reporting/``.
"""

from __future__ import annotations

import difflib
import io
import tokenize

from rich.console import Console
from rich.text import Text

_STYLES = {"+": "green", "-": "red", "@": "cyan"}


def decode_text(data: bytes) -> str:
    """The text of a source file (its coding cookie or UTF-8; latin-1 when that fails)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("latin-1")


def unified_diff(path: str, old: bytes | None, new: bytes) -> str:
    """A git-style diff; ``old=None`` is a new file (``--- /dev/null``)."""
    lines = difflib.unified_diff(
        decode_text(old or b"").splitlines(keepends=True),
        decode_text(new).splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path.lstrip('/')}",
        tofile=f"b/{path.lstrip('/')}",
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


def print_diff(console: Console, diff: str) -> None:
    for line in diff.splitlines():
        style = "bold" if line.startswith(("---", "+++")) else _STYLES.get(line[:1])
        console.print(Text(line.rstrip("\r"), style=style or ""), soft_wrap=True, highlight=False)
