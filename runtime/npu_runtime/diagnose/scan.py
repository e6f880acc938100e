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

import gzip
import io
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from .signatures import SIGNATURES, Signature

MAX_LINE = 64 * 1024
MAX_FILES = 10_000
MAX_EVIDENCE = 300
#: Bytes read out of one gzip-compressed log at most: a 4 MB "gzip bomb" inflates to
#: 4 GB (37 s), a 50 MB one would take minutes. Past it the rest is not read, with a note.
MAX_GZIP_BYTES = 256 << 20
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

    Every regex runs only on lines holding its required literal (``Signature.literals``),
    tested in one flat loop per line: most log lines are noise, and a substring test is
    far cheaper than a regex search or a call per signature."""
    checks = [(literal[0] if literal else None, bool(literal and literal[1]), regex, signature)
              for signature in signatures for regex, literal in zip(signature.matchers, signature.literals)]
    found: dict[str, Diagnosis] = {}
    order: dict[str, int] = {}
    seen = 0
    for name, lines in named_lines:
        for number, raw in enumerate(lines, start=1):
            line = raw[:MAX_LINE]
            lowered = line.lower()
            matched: Signature | None = None
            for text, ignore_case, regex, signature in checks:
                if signature is matched:
                    continue  # this signature already matched this line
                if text is not None and text not in (lowered if ignore_case else line):
                    continue
                if not regex.search(line):
                    continue
                matched = signature
                known = found.get(signature.id)
                if known is None:
                    found[signature.id] = Diagnosis(signature, name, number, _evidence(line))
                    order[signature.id] = seen
                    seen += 1
                else:
                    known.count += 1
                    if name != known.file and name not in known.also_in and len(known.also_in) < 20:
                        known.also_in.append(name)
    return sorted(found.values(), key=lambda d: (d.signature.rank, order[d.signature.id]))


def diagnose_paths(paths: Sequence[str], stdin: io.IOBase | None = None) -> list[Diagnosis]:
    """Diagnoses for log files, directories of logs and ``-`` (standard input).

    Raises ``LogError`` naming the first path that cannot be read."""
    return diagnose_lines(_open_all(paths, stdin))


def _open_all(paths: Sequence[str], stdin: io.TextIOBase | None) -> Iterator[tuple[str, Iterable[str]]]:
    for path in paths:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin
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
    count = 0
    for root, dirs, files in os.walk(directory, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            if not name.removesuffix(".gz").endswith(LOG_SUFFIXES):
                continue
            path = os.path.join(root, name)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            count += 1
            if count > MAX_FILES:
                return
            yield path


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


def _lines(stream: io.IOBase, name: str) -> Iterator[str]:
    """The text lines of a byte (or text) stream, each cut to ``MAX_LINE`` characters,
    in memory bounded by ``MAX_LINE`` whatever the longest line."""
    if isinstance(stream, io.TextIOBase):
        text = stream
    else:
        binary = stream if isinstance(stream, io.BufferedIOBase) else io.BufferedReader(stream)  # type: ignore[arg-type]
        if binary.peek(2)[:2] == GZIP_MAGIC:
            binary = io.BufferedReader(_Capped(gzip.GzipFile(fileobj=binary, mode="rb"), name))  # type: ignore[assignment]
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="replace", newline=None)
    try:
        while True:
            line = text.readline(MAX_LINE)
            if not line:
                return
            if not line.endswith("\n"):
                # Longer than MAX_LINE: drop the rest of this line without holding it.
                while True:
                    rest = text.readline(MAX_LINE)
                    if not rest or rest.endswith("\n"):
                        break
            yield line
    except (OSError, EOFError) as exc:  # a truncated or corrupt gzip stream
        raise LogError(f"{name}: {exc}") from None
    finally:
        if text is not stream:
            text.detach()


class _Capped(io.RawIOBase):
    """The first ``MAX_GZIP_BYTES`` of a decompressed stream, then its end (with one note)."""

    def __init__(self, inner: io.IOBase, name: str) -> None:
        self.inner, self.name, self.left = inner, name, MAX_GZIP_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self.left <= 0:
            return 0
        data = self.inner.read(min(len(buffer), self.left))
        self.left -= len(data)
        buffer[:len(data)] = data
        if self.left <= 0 and self.inner.read(1):
            print(f"diagnose: {self.name}: only the first {MAX_GZIP_BYTES >> 20} MB of the decompressed log "
                  "were read", file=sys.stderr)
        return len(data)


def _evidence(line: str) -> str:
    text = line.strip()
    return text if len(text) <= MAX_EVIDENCE else text[:MAX_EVIDENCE - 3] + "..."
