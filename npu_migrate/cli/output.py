"""Unified diffs (difflib, coloured by rich on a terminal).

Diffs go to stdout, so ``npu-migrate src > migration.patch`` gives a patch that
``git apply`` accepts, byte for byte. Reports (findings, the summary, machine
formats) are ``npu_migrate/reporting/``.
"""

from __future__ import annotations

import collections
import difflib
import io
import itertools
import os
from collections.abc import Iterator

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


#: Above this many lines (old and new together) the diff is anchored on unique lines
#: first (:class:`AnchoredMatcher`): difflib's matcher alone is quadratic in the
#: number of changed places (a 1000-cell notebook with one change per cell: 13 s).
ANCHOR_LINES = 4000


class AnchoredMatcher(difflib.SequenceMatcher):
    """``difflib.SequenceMatcher`` that first pairs the lines occurring exactly once in
    each side (in order: the longest increasing run of them, as patience diff does),
    then lets difflib match each stretch between two anchors on its own. The work is
    then about linear in the file for the usual diff of a migration (many small
    changes far apart); the result is a valid diff of the same files, not always
    difflib's minimal one."""

    def get_matching_blocks(self):
        if self.matching_blocks is not None:
            return self.matching_blocks
        a, b = self.a, self.b
        count_a, count_b = collections.Counter(a), collections.Counter(b)
        where_b = {line: j for j, line in enumerate(b) if count_b[line] == 1}
        pairs = [(i, where_b[line]) for i, line in enumerate(a) if count_a[line] == 1 and line in where_b]
        blocks: list[tuple[int, int, int]] = []
        i0 = j0 = 0
        for i, j in [*_increasing(pairs), (len(a), len(b))]:
            matcher = difflib.SequenceMatcher(None, a[i0:i], b[j0:j], autojunk=self.autojunk)
            blocks.extend((i0 + x, j0 + y, size) for x, y, size in matcher.get_matching_blocks() if size)
            if i < len(a):
                blocks.append((i, j, 1))
            i0, j0 = i + 1, j + 1
        merged: list[tuple[int, int, int]] = []
        for x, y, size in blocks:  # adjacent blocks as one, as difflib returns them
            if merged and merged[-1][0] + merged[-1][2] == x and merged[-1][1] + merged[-1][2] == y:
                merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + size)
            else:
                merged.append((x, y, size))
        merged.append((len(a), len(b), 0))
        self.matching_blocks = [difflib.Match(*block) for block in merged]
        return self.matching_blocks


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``pairs`` (sorted by the first) increasing in the second too."""
    tails: list[int] = []  # tails[k]: index in pairs of the smallest end of a run of length k + 1
    previous: list[int] = []
    for index, (_, j) in enumerate(pairs):
        at = _search(pairs, tails, j)
        previous.append(tails[at - 1] if at else -1)
        if at == len(tails):
            tails.append(index)
        else:
            tails[at] = index
    run: list[tuple[int, int]] = []
    index = tails[-1] if tails else -1
    while index != -1:
        run.append(pairs[index])
        index = previous[index]
    return run[::-1]


def _search(pairs: list[tuple[int, int]], tails: list[int], j: int) -> int:
    """Where ``j`` goes among the ends of the runs (a binary search)."""
    low, high = 0, len(tails)
    while low < high:
        middle = (low + high) // 2
        if pairs[tails[middle]][1] < j:
            low = middle + 1
        else:
            high = middle
    return low


def _range(start: int, stop: int) -> bytes:
    """A hunk header's range, as ``difflib.unified_diff`` writes it."""
    length = stop - start
    if length == 1:
        return b"%d" % (start + 1)
    return b"%d,%d" % (start if not length else start + 1, length)


def _hunks(a: list[bytes], b: list[bytes]) -> Iterator[bytes]:
    """The hunks of a unified diff with 3 lines of context (difflib's format)."""
    matcher = AnchoredMatcher(None, a, b)
    for group in matcher.get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        yield b"@@ -" + _range(first[1], last[2]) + b" +" + _range(first[3], last[4]) + b" @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (b" " + line for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from (b"-" + line for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from (b"+" + line for line in b[j1:j2])


def unified_diff(path: str, old: bytes | None, new: bytes) -> bytes:
    """A git-style diff of the file's bytes, as ``git apply`` reads them: lines end at
    ``\\n`` only (a ``\\r`` stays in its line, so CRLF and CR-only files round-trip,
    and so do form feeds, ``\\x1c`` and U+2028), in the file's own encoding.
    ``old=None`` is a new file (``--- /dev/null``)."""
    name = os.fsencode(path).lstrip(b"/")
    a, b = io.BytesIO(old or b"").readlines(), io.BytesIO(new).readlines()
    if len(a) + len(b) > ANCHOR_LINES:
        lines = _hunks(a, b)
    else:
        lines = itertools.islice(difflib.diff_bytes(difflib.unified_diff, a, b, lineterm=b"\n"), 2, None)
    source = b"/dev/null" if old is None else git_quoted(b"a/" + name)
    out = [b"--- " + source + b"\n", b"+++ " + git_quoted(b"b/" + name) + b"\n"]
    for line in lines:  # (without difflib's own ---/+++ lines)
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
