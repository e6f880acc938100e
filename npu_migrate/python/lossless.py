"""The bytes libcst does not give back, kept aside and put back.

libcst regenerates a module byte for byte, with two exceptions found so far:

* a form feed in the indentation of a statement line (``\\fdef f():``, or
  ``x = 1\\n\\fy = 2``): Python ignores everything up to the last form feed of
  an indentation, and libcst writes the block's indentation in its place, so
  the form feed (and whatever stood before it) is dropped;
* the last line ending of a file whose lines end in a lone CR;
* blank lines at the end of a file once two of them (or one before a trailing
  comment) hold spaces or tabs: ``x = 1\n    \n    \n`` comes back as ``x = 1\n    \n``
  (ai-toolkit's ``calculate_timestep_weighing_flex.py`` ends in eleven such lines).

:func:`protect` cuts the file's trailing run of blank and comment-only lines off
(they mean nothing to Python, and nothing is inserted after the last statement),
takes those form-feed prefixes out of the bytes libcst parses
(the indentation Python counts, and every line number, stay the same);
:meth:`Protected.restore` puts them back in front of the same statements of the
generated module, found by aligning it with what was parsed (difflib: unchanged
lines, and among rewritten ones the most alike; the prefix of a removed statement
goes in front of the line that follows it), puts back the final CR, then the cut tail. Lines inside brackets, strings and comments keep their form
feeds in libcst, and are left alone.
"""

from __future__ import annotations

import difflib
import io
import re
import tokenize
from dataclasses import dataclass, field

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
#: A line whose indentation holds a form feed and is followed by code.
_FEED_INDENT = re.compile(rb"(?:^|(?<=[\r\n]))[ \t\f]*\f(?=[ \t\f]*[^ \t\f\r\n#\\])")
_LONE_CR = re.compile(rb"\r(?!\n)")
_FEED_PREFIX = re.compile(rb"[ \t\f]*\f")
#: A line of the tail: blank (maybe with spaces, tabs, form feeds) or a comment only.
_TAIL_LINE = re.compile(rb"[ \t\f]*(?:#[^\r\n]*)?(?:\r\n|\r|\n)?")
_LOGICAL_END = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
_NOT_CODE = {tokenize.NL, tokenize.COMMENT}


@dataclass
class Protected:
    """What libcst parses, and what it would otherwise lose."""

    data: bytes
    #: 0-based line number -> the form-feed prefix taken off that line.
    prefixes: dict[int, bytes] = field(default_factory=dict)
    #: The trailing blank and comment-only lines cut off the end of the file.
    tail: bytes = b""

    def restore(self, generated: bytes) -> bytes:
        """libcst's output for :attr:`data` (possibly transformed) with the lost bytes back."""
        if self.prefixes:
            generated = self._restore_prefixes(generated)
        lost = _trailing_lone_crs(self.data) - _trailing_lone_crs(generated)
        if lost > 0:
            generated += b"\r" * lost
        return generated + self.tail

    def _restore_prefixes(self, generated: bytes) -> bytes:
        parsed = _LINE.findall(self.data)
        lines = _LINE.findall(generated)
        carried = b""  # the prefixes of removed statements (an import nothing uses any more)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, parsed, lines, autojunk=False).get_opcodes():
            if tag == "equal":
                pairs = list(zip(range(i1, i2), range(j1, j2)))
            elif tag == "replace":  # rewritten lines, maybe next to inserted ones: the most alike
                pairs = list(_most_alike(parsed, lines, [i for i in range(i1, i2) if i in self.prefixes], j1, j2))
            else:
                pairs = []
            placed = {i for i, _ in pairs}
            for i, j in pairs:
                if i in self.prefixes:
                    lines[j] = self.prefixes[i] + lines[j]
            if carried and j1 < len(lines) and tag != "delete":
                lines[j1] = carried + lines[j1]
                carried = b""
            carried += b"".join(self.prefixes[i] for i in range(i1, i2) if i in self.prefixes and i not in placed)
        if carried and lines:  # removed at the end of the file: onto the last statement
            lines[-1] = carried + lines[-1]
        return b"".join(lines)


def _most_alike(parsed: list[bytes], lines: list[bytes], wanted: list[int], start: int, end: int):
    """Pairs (i, j), j in [start, end) increasing, each ``lines[j]`` the one most like ``parsed[i]``."""
    for i in wanted:
        if start >= end:
            return
        j = max(range(start, end), key=lambda j: difflib.SequenceMatcher(None, parsed[i], lines[j]).ratio())
        yield i, j
        start = j + 1


def _trailing_lone_crs(data: bytes) -> int:
    """How many bare ``\\r`` line endings the bytes end with (a ``\\r\\n`` ends the count)."""
    if data.endswith(b"\r\n"):
        return 0
    return len(data) - len(data.rstrip(b"\r"))


def _statement_lines(data: bytes) -> set[int] | None:
    """0-based lines where a logical line (a statement, a decorator) starts; None if tokenize fails."""
    starts: set[int] = set()
    at_start = True
    data = _LONE_CR.sub(b"\n", data)  # Python's own tokenizer reads a lone CR as a newline too
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type in _LOGICAL_END:
                at_start = True
            elif token.type not in _NOT_CODE and at_start:
                starts.add(token.start[0] - 1)
                at_start = False
    except (tokenize.TokenError, SyntaxError):
        return None
    return starts


def _split_tail(data: bytes) -> tuple[bytes, bytes]:
    """``data`` as (code, tail): the tail is the run of blank and comment-only lines
    that ends the file, cut only where one of them holds spaces or tabs (the bytes
    libcst may lose) and the code before it ends with a line ending."""
    if not data.endswith((b" ", b"\t", b"\n", b"\r")):
        return data, b""
    lines = _LINE.findall(data)
    cut = len(lines)
    while cut > 0 and _TAIL_LINE.fullmatch(lines[cut - 1]):
        cut -= 1
    if cut == 0 or cut == len(lines):
        return data, b""
    tail = b"".join(lines[cut:])
    code = data[: len(data) - len(tail)]
    if not code.endswith((b"\n", b"\r")) or code.rstrip(b"\r\n").endswith(b"\\"):
        return data, b""
    if not any(line.strip(b"\r\n").strip(b"\f") and not line.lstrip().startswith(b"#") for line in lines[cut:]):
        return data, b""  # no blank line with spaces or tabs in it: libcst keeps these
    return code, tail


def protect(data: bytes) -> Protected:
    data, tail = _split_tail(data)
    if b"\f" not in data or _FEED_INDENT.search(data) is None:
        return Protected(data, tail=tail)
    starts = _statement_lines(data)
    if not starts:
        return Protected(data, tail=tail)
    lines = _LINE.findall(data)
    prefixes: dict[int, bytes] = {}
    for number in sorted(starts):
        if number >= len(lines):
            continue
        match = _FEED_PREFIX.match(lines[number])
        if match is not None and _FEED_INDENT.match(lines[number]):
            prefixes[number] = match.group()
            lines[number] = lines[number][match.end():]
    return Protected(b"".join(lines), prefixes, tail)
