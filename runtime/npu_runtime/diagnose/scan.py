"""Read logs and match them against the signature table.

Logs are read line by line in bounded memory (any size, any encoding: undecodable bytes
are replaced; LF, CRLF and CR line ends), and each line is matched on its first
``MAX_LINE`` characters (the rest of a longer line is read and dropped in chunks, never
held). A gzip-compressed log (rotated or downloaded logs, ``plog-*.log.gz``) is read
through: it is recognised by its magic bytes, whatever its name, so a compressed log
is never reported as "no failure" because its bytes matched nothing. A directory is
walked for log files (CANN writes ``plog-<pid>_<time>.log`` under
``~/ascend/log/debug/plog``), without following symbolic links, up to ``MAX_FILES``
files. Archives (``.tar.gz``) are not opened: extract them first. Each signature is reported once,
at its first line, with the number of lines that matched it; diagnoses come ordered
root cause first (the signature's rank, then where it was seen first).
"""

from __future__ import annotations

import bisect
import functools
import io
import itertools
import operator
import os
import re
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .signatures import SIGNATURES, Signature
from .terminal import safe

MAX_LINE = 64 * 1024
MAX_FILES = 10_000
MAX_EVIDENCE = 300
#: Characters of lines matched together (see ``diagnose_lines``)
BATCH_CHARS = 1 << 20
#: A literal found more than ``len(batch) >> DENSE_SHIFT`` times in a batch has its regex run
#: once over the batch (about 10 ns a character) rather than once per line holding it (about 1 us)
DENSE_SHIFT = 8
#: Bytes read out of one gzip-compressed log at most: a 4 MB "gzip bomb" inflates to
#: 4 GB (37 s), a 50 MB one would take minutes. Past it the rest is not read, with a note.
MAX_GZIP_BYTES = 256 << 20
#: gzip members read out of one log at most. Each member costs a header parse and a new
#: decompressor (about 8 us in Python's gzip): 2 million empty members (40 MB) took 16 to 32 s
#: and inflate to nothing, so MAX_GZIP_BYTES never stops them. A log is one member, or a few
#: (rotated logs joined with cat); past the bound the log is one error line.
MAX_GZIP_MEMBERS = 100_000
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
GZIP_MAGIC = b"\x1f\x8b"


class LogError(OSError):
    """A log cannot be read; the message names it."""


@dataclass
class Diagnosis:
    signature: Signature
    file: str
    line: int
    evidence: str
    count: int = 1
    also_in: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        s = self.signature
        return {
            "id": s.id,
            "cause": s.cause,
            "severity": s.severity,
            "file": self.file,
            "line": self.line,
            "evidence": self.evidence,
            "count": self.count,
            "meaning": s.meaning,
            "action": s.action,
            "restart": s.restart,
            "exit_class": s.exit_class,
            "also_in": list(self.also_in),
        }


def diagnose_lines(named_lines: Iterable[tuple[str, Iterable[str]]],
                   signatures: Sequence[Signature] = SIGNATURES) -> list[Diagnosis]:
    """Diagnoses for ``(name, lines)`` pairs, root cause first.

    Every regex runs only on lines holding its required literal (``Signature.literals``).
    Lines are taken in batches of up to ``BATCH_CHARS`` characters: each literal is looked
    for once in the whole batch (``str.find``, in C), and only the lines that hold it are
    searched with its regex. A per-line loop over the table cost about 3.5 us a line in
    Python, so 50 MB of empty or short lines took minutes; the batch costs one substring
    scan per literal plus work for the lines that hold one (each holds at least the
    literal's own characters, so that work is bounded by the log's size too)."""
    checks = [(literal[0] if literal else None, bool(literal and literal[1]), regex, signature, line_confined(regex))
              for signature in signatures for regex, literal in zip(signature.matchers, signature.literals)]
    found: dict[str, Diagnosis] = {}
    order: dict[str, int] = {}
    state = [0]  # signatures seen so far: their order of first appearance
    for name, lines in named_lines:
        batch: list[str] = []
        size = 0
        first = 1  # the line number of batch[0]
        if isinstance(lines, _LogLines):  # read in batches already
            for batch in lines.batches():
                _match_batch(name, first, batch, checks, found, order, state)
                first += len(batch)
            continue
        for raw in lines:
            line = raw[:MAX_LINE]
            batch.append(line)
            size += len(line) + 1
            if size >= BATCH_CHARS:
                _match_batch(name, first, batch, checks, found, order, state)
                first += len(batch)
                batch, size = [], 0
        if batch:
            _match_batch(name, first, batch, checks, found, order, state)
    return sorted(found.values(), key=lambda d: (d.signature.rank, order[d.signature.id]))


def _match_batch(name: str, first: int, batch: list[str], checks: list[tuple[str | None, bool, Any, Signature, Any]],
                 found: dict[str, Diagnosis], order: dict[str, int], state: list[int]) -> None:
    """Match one batch of lines (numbered from ``first``) and record what matched, exactly as
    a line-by-line pass in table order would: per line, each signature at most once."""
    text = "\n".join(batch)
    starts: list[int] = []  # where each line starts in ``text``: made on the first literal found
    line_of = functools.partial(bisect.bisect_right, starts)  # 1 + the index of the line holding a position
    one_line_each = text.count("\n") == len(batch) - 1  # no line holds a line end of its own
    lowered: str | None = None
    lowered_lines: list[str] | None = None
    matched: dict[str, list[tuple[set[int], int]]] = {}  # signature id: (line indexes + 1, check index)
    for index, (literal, ignore_case, regex, signature, confined) in enumerate(checks):
        if literal is not None:
            haystack = text
            if ignore_case:
                if lowered is None:
                    lowered = text.lower()
                    if len(lowered) != len(text):  # a character whose lower case is longer (U+0130)
                        lowered_lines = [line.lower() for line in batch]
                haystack = lowered
            if literal not in haystack:
                continue
        if not starts:  # in C: most batches (50 MB of empty lines) hold no literal at all
            starts.extend(itertools.accumulate(map(_PLUS_ONE, map(len, batch[:-1])), initial=0))
        if confined is not None and one_line_each and literal is not None \
                and haystack.count(literal) > len(text) >> DENSE_SHIFT:
            # The literal is on most lines: one pass of the regex over the whole batch (in C)
            # costs less than a call per line. ``confined`` never matches across a line end.
            lines = set(map(line_of, map(_START, confined.finditer(text))))
        else:
            if literal is None:
                candidates: Iterable[int] = range(len(batch))
            elif ignore_case and lowered_lines is not None:
                candidates = [i for i, line in enumerate(lowered_lines) if literal in line]
            else:
                candidates = _lines_holding(haystack, literal, starts)
            if confined is not None and one_line_each:
                # Searched in place (no copy of the line): ``confined`` matches within
                # text[start:end] exactly where the regex matches that line on its own.
                search = confined.search
                lines = {i + 1 for i in candidates if search(text, starts[i], starts[i] + len(batch[i]))}
            else:
                lines = {i + 1 for i in candidates if regex.search(batch[i])}
        if lines:
            matched.setdefault(signature.id, []).append((lines, index))
    if not matched:
        return
    new: list[tuple[int, int, str]] = []
    for signature_id, sets in matched.items():
        union = set().union(*(lines for lines, _ in sets))
        line = min(union)
        known = found.get(signature_id)
        if known is None:
            check = min(index for lines, index in sets if line in lines)
            signature = checks[check][3]
            found[signature_id] = Diagnosis(signature, name, first + line - 1, _evidence(batch[line - 1]),
                                            count=len(union))
            new.append((line, check, signature_id))
        else:
            known.count += len(union)
            if name != known.file and name not in known.also_in and len(known.also_in) < 20:
                known.also_in.append(name)
    for _line, _check, signature_id in sorted(new):
        order[signature_id] = state[0]
        state[0] += 1


def line_confined(matcher: Any) -> re.Pattern[str] | None:
    """``matcher``'s regex rewritten so that it can run over many lines joined with ``\\n``
    and match exactly where it matches one of those lines on its own: ``\\s`` no longer
    takes a line end, ``^`` holds at each line's start (``re.MULTILINE``). None where
    that cannot be shown from the pattern's text (a ``Sequence``, a negated or ``\\s``
    class, ``$``, ``\\S``/``\\W``/``\\D``, a dot under DOTALL, ``\\A``/``\\Z``, a ``\\n``):
    those are searched line by line."""
    if not isinstance(matcher, re.Pattern) or matcher.flags & (re.DOTALL | re.VERBOSE | re.MULTILINE):
        return None
    pattern, out, i, in_class = matcher.pattern, [], 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escape = pattern[i:i + 2]
            if escape[1:] in ("S", "W", "D", "A", "Z", "n", "x", "u", "U", "N", "0") or escape[1:].isdigit():
                return None
            if escape == "\\s":
                if in_class:
                    return None
                out.append("[^\\S\\n]")
            else:
                out.append(escape)
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            if pattern[i + 1:i + 2] in ("^", "]"):
                return None
            in_class = True
        elif char == "$" or pattern.startswith("(?s", i) or pattern.startswith("(?x", i) or pattern.startswith("(?m", i):
            return None
        out.append(char)
        i += 1
    try:
        return re.compile("".join(out), matcher.flags | re.MULTILINE)
    except re.error:
        return None


_START = operator.methodcaller("start")
_PLUS_ONE = functools.partial(operator.add, 1)


def _lines_holding(text: str, literal: str, starts: list[int]) -> list[int]:
    """Indexes of the lines (starting at ``starts`` in ``text``) that hold ``literal``,
    each once: after a hit the search goes on from the next line's start."""
    out: list[int] = []
    pos = text.find(literal)
    count = len(starts)
    while pos >= 0:
        i = bisect.bisect_right(starts, pos) - 1
        out.append(i)
        if i + 1 >= count:
            break
        pos = text.find(literal, starts[i + 1])
    return out


def diagnose_paths(paths: Sequence[str], stdin: io.IOBase | None = None) -> list[Diagnosis]:
    """Diagnoses for log files, directories of logs and ``-`` (standard input).

    Raises ``LogError`` naming the first path that cannot be read."""
    return diagnose_lines(_open_all(paths, stdin))


def _open_all(paths: Sequence[str], stdin: io.TextIOBase | None) -> Iterator[tuple[str, Iterable[str]]]:
    for path in paths:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin
            if stream is None:  # started with standard input closed (<&-)
                raise LogError("<stdin>: standard input is closed")
            if isinstance(stream, io.TextIOBase) and hasattr(stream, "buffer"):
                stream = stream.buffer  # decode it ourselves: a log's bytes are not the locale's
            yield "<stdin>", _lines(stream, "<stdin>")
            continue
        try:
            info = os.stat(path)
        except OSError as exc:
            raise LogError(f"{path}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(info.st_mode):
            for file in _log_files(path):
                yield from _read(file)
        else:
            yield from _read(path)


def _log_files(directory: str) -> Iterator[str]:
    """The log files below ``directory``, in os.walk's top-down order with names sorted, walked
    with a stack rather than recursion (os.walk recurses once per level before Python 3.12:
    a tree 1,000 directories deep was a RecursionError), links not followed; a directory or
    entry that cannot be read (gone, unreadable, a path longer than PATH_MAX) is skipped."""
    count = 0
    stack = [directory]
    while stack:
        root = stack.pop()
        try:
            with os.scandir(root) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.path)
                    continue
                if not entry.name.removesuffix(".gz").endswith(LOG_SUFFIXES):
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
            except OSError:
                continue
            count += 1
            if count > MAX_FILES:
                return
            yield entry.path
        stack.extend(reversed(subdirs))


def _read(path: str) -> Iterator[tuple[str, Iterable[str]]]:
    # O_NONBLOCK: a FIFO named as a log must not block the diagnosis forever.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise LogError(f"{path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LogError(f"{path}: not a regular file")
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as stream:
            yield path, _lines(stream, path)
    finally:
        os.close(fd)


class _LogLines:
    """The text lines of a byte (or text) stream, each cut to ``MAX_LINE`` characters,
    in memory bounded by ``BATCH_CHARS + MAX_LINE`` whatever the longest line.

    Iterating gives the lines one by one; ``batches()`` gives them in lists of about
    ``BATCH_CHARS`` characters, cut from large reads in C (``str.split``), which is what
    ``diagnose_lines`` uses: 50 MB of empty lines is 50 million lines, and a Python
    ``readline`` per line alone took about 11 s of it."""

    def __init__(self, stream: io.IOBase, name: str) -> None:
        self.stream, self.name = stream, name

    def __iter__(self) -> Iterator[str]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[str]]:
        stream = self.stream
        if isinstance(stream, io.TextIOBase):
            text = stream
        else:
            binary = stream if isinstance(stream, io.BufferedIOBase) else io.BufferedReader(stream)  # type: ignore[arg-type]
            if binary.peek(2)[:2] == GZIP_MAGIC:
                binary = io.BufferedReader(_Gunzip(binary, self.name))  # type: ignore[assignment]
            text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline=None)
        carry = ""  # the start of a line that goes on in the next read (at most MAX_LINE characters)
        dropping = False  # carry is already cut at MAX_LINE: drop the rest of the line
        try:
            while True:
                chunk = text.read(BATCH_CHARS)
                if not chunk:
                    break
                parts = chunk.split("\n")  # parts[0] goes on from carry; parts[-1] goes on in the next read
                if len(parts) == 1:  # no line end in this read
                    if not dropping:
                        carry += parts[0]
                        if len(carry) > MAX_LINE:
                            carry, dropping = carry[:MAX_LINE], True
                    continue
                parts[0] = carry if dropping else (carry + parts[0])[:MAX_LINE]
                carry, dropping = parts.pop(), False
                if len(carry) > MAX_LINE:
                    carry, dropping = carry[:MAX_LINE], True
                # parts[0] is cut already; the others share the chunk's characters that are not
                # line ends, so none can be too long unless those are (not so for blank lines)
                if len(chunk) - len(parts) > MAX_LINE and max(map(len, parts)) > MAX_LINE:
                    parts = [part[:MAX_LINE] for part in parts]
                yield parts
            if carry:
                yield [carry]
        except LogError:
            raise
        except (OSError, EOFError) as exc:  # a truncated or corrupt gzip stream
            raise LogError(f"{self.name}: {exc}") from None
        finally:
            if text is not stream:
                text.detach()


def _lines(stream: io.IOBase, name: str) -> _LogLines:
    return _LogLines(stream, name)


class _Gunzip(io.RawIOBase):
    """The decompressed bytes of a gzip stream of one or more members, in C (zlib), up to
    ``MAX_GZIP_BYTES`` (then its end, with one note) and ``MAX_GZIP_MEMBERS`` (then a
    ``LogError``). Zero bytes between members are skipped, as gzip does; a truncated or
    corrupt stream, or trailing bytes that are not gzip, raise OSError or EOFError."""

    CHUNK = 1 << 16

    def __init__(self, raw: io.BufferedIOBase, name: str) -> None:
        self.raw, self.name, self.left = raw, name, MAX_GZIP_BYTES
        self.members = 1
        self.inflate = zlib.decompressobj(31)
        self.done = False

    def readable(self) -> bool:
        return True

    def _next_member(self) -> bytes | None:
        """The compressed bytes after the member that has ended (starting with the next
        member's magic), or None at the stream's end."""
        rest = self.inflate.unused_data.lstrip(b"\0")
        while not rest:
            more = self.raw.read(self.CHUNK)
            if not more:
                return None
            rest = more.lstrip(b"\0")
        if len(rest) < 2:
            rest += self.raw.read(self.CHUNK)
        if rest[:2] != GZIP_MAGIC:
            raise OSError("not a gzip stream after the end of its last member")
        self.members += 1
        if self.members > MAX_GZIP_MEMBERS:
            raise LogError(f"{self.name}: more than {MAX_GZIP_MEMBERS:,} gzip members (a log holds one, or a few "
                           "joined with cat): not read; decompress it first (gzip -dc)")
        self.inflate = zlib.decompressobj(31)
        return rest

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self.done or self.left <= 0:
            return 0
        want = min(len(buffer), self.left)
        while True:
            if self.inflate.eof:
                data = self._next_member()
                if data is None:
                    self.done = True
                    return 0
            else:
                data = self.inflate.unconsumed_tail or self.raw.read(self.CHUNK)
                if not data:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
            try:
                out = self.inflate.decompress(data, want)
            except zlib.error as exc:
                raise OSError(f"corrupt gzip data ({exc})") from None
            if out:
                break
        count = len(out)
        buffer[:count] = out
        self.left -= count
        if self.left <= 0 and (not self.inflate.eof or self.inflate.unused_data.strip(b"\0") or self.raw.read(1)):
            print(f"diagnose: {safe(self.name)}: only the first {MAX_GZIP_BYTES >> 20} MB of the decompressed log "
                  "were read", file=sys.stderr)
        return count


def _evidence(line: str) -> str:
    text = line.strip()
    return text if len(text) <= MAX_EVIDENCE else text[:MAX_EVIDENCE - 3] + "..."
