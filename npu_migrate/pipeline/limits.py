"""Limits every front end applies before its parser sees a file: size and nesting.

Parsers of nested formats recurse (PyYAML's composer, tomllib, nbformat's
``json``), build a key path per level (quadratic in the depth), or take
super-linear time on pathological nesting (tree-sitter-bash on 50,000 nested
``$(``). So each reader first calls :func:`check` with its format: a file larger
than :data:`MAX_BYTES`, or nested deeper than :data:`MAX_DEPTH`, is refused with a
:class:`LimitError` that names the line; the runner turns it (and a
``RecursionError`` or ``MemoryError`` that escapes a parser anyway) into one line
``path:line: ...``, exit 2, the file untouched, the other files processed.

The depth is counted with one regular-expression pass over the bracket tokens
of the format (strings and comments skipped where that is cheap and certain), so
it costs well under a second per megabyte whatever the shape; the count may err
high on odd files (brackets in a plain YAML scalar), never by the hundreds of
levels the limit leaves: real configuration files nest a few dozen levels at most.

A tree-sitter parse (shell, Dockerfile, JSON) is also bounded in time,
:func:`parse_bounded`: tree-sitter-bash's error recovery costs time quadratic in the
number of lines that are not shell (a template's ``ROOT=<ROOT_PATH>`` before each
command), which no count of bytes or brackets sees beforehand.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import time

try:
    import resource
except ImportError:  # not on Unix: physical memory only
    resource = None

#: Deepest nesting of brackets (JSON/YAML/TOML) or compound commands (shell) accepted.
MAX_DEPTH = 200
#: Per format, where the parser has a lower limit of its own (tomlkit: 100).
DEPTHS = {"toml": 100}
#: Largest file accepted per format (notebooks carry outputs, images included).
#: Shell scripts and Dockerfiles (checked only once a rule's trigger word is in them):
#: 2 MB. Every command holding a trigger is a fix, and the rules cost about 3 s per MB
#: of such lines here (shell) and 6 s (Dockerfile RUN lines): 30 MB of them gave no answer
#: in 60 s (round 5). Hand-written scripts and Dockerfiles stay far below.
MAX_BYTES = {"json": 32 << 20, "yaml": 32 << 20, "toml": 32 << 20, "shell": 2 << 20,
             "dockerfile": 2 << 20, "notebook": 128 << 20, "requirements": 32 << 20, "ini": 32 << 20}
#: Largest Python source parsed in one piece (a .py file, or a notebook's code cells
#: joined): libcst and the rules take about 1 s per 30 KB of dense device code on a
#: loaded machine, so a 3 MB file of ``torch.cuda`` lines (or 100,000 one-line cells)
#: ran past a minute (round 4, held-out pass). Hand-written modules stay far below.
MAX_PYTHON_BYTES = 1 << 20
#: Lines of a dependency file read at most (requirements, environment.yml, pyproject.toml,
#: setup.cfg): the readers and the rules spend several microseconds a line in Python, so the
#: 32 MB their size limit allows (millions of short lines) took over 80 s; real dependency
#: files have hundreds of lines, and more than 2,000 requirements are refused anyway
#: (npu_migrate.deps.engine.MAX_ENTRIES). The project-facts scan skips such files too.
MAX_DEPENDENCY_LINES = 100_000


def dependency_lines(data: bytes) -> int:
    """Line ends in ``data`` as the dependency readers split lines: LF, CRLF and a lone CR
    (pip, configparser and the TOML reader take all three). Counting LF alone let 3 MB of
    CR line ends (3 million lines to the readers) past MAX_DEPENDENCY_LINES: 11 s, and
    the 32 MB the size limit allows would take minutes."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")

#: Strings and comments unrolled (``"[^"\\]*(?:\\.[^"\\]*)*"``: a run of plain characters at a time,
#: 3 s per 8 MB string before) and closed by the end of the line or file when their
#: closing mark is missing, so that a run of unclosed ``"`` or ``/*`` costs one pass.
_JSON = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|//[^\n]*|/\*(?:.*?\*/|.*)|(?P<open>[\[{])|(?P<close>[\]}])', re.DOTALL)
_TOML = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|\'[^\'\n]*\'?|#[^\n]*|(?P<open>[\[{])|(?P<close>[\]}])')
_YAML = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[ \t]#[^\n]*|^#[^\n]*|(?P<open>[\[{])|(?P<close>[\]}])', re.MULTILINE)
#: Shell: ``$(``, subshells and groups, and compound commands (a keyword where a
#: command starts: checked in :func:`_command_word`); quoted text and comments (a
#: ``#`` that starts a word) are skipped.
_SHELL = re.compile(
    r"'[^']*'|(?<!\S)#[^\n]*|(?P<open>\$\(|[({])|(?P<close>[)}])"
    r"|(?P<word>(?<![\w-])(?:if|case|while|until|for|select|fi|esac|done)(?![\w-]))"
)
_OPENERS = frozenset({"if", "case", "while", "until", "for", "select"})
_SEPARATORS = frozenset(";&|(){}`\n")


def _command_word(text: str, at: int) -> bool:
    """Whether the keyword at ``at`` is where a command starts (not an argument)."""
    j = at
    while j and text[j - 1] in " \t":
        j -= 1
    if j and text[j - 1] == "!":
        j -= 1
        while j and text[j - 1] in " \t":
            j -= 1
    return j == 0 or text[j - 1] in _SEPARATORS or text.endswith(("then", "do", "else"), max(0, j - 4), j)


_PATTERNS = {"json": _JSON, "notebook": _JSON, "toml": _TOML, "yaml": _YAML, "shell": _SHELL,
             "dockerfile": _SHELL}


class LimitError(ValueError):
    """A file over a limit: ``line`` and a one-line ``message`` (without the path)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def check(data: bytes | str, kind: str) -> None:
    """Raise :class:`LimitError` if ``data`` (a file of format ``kind``) is too large
    or nested deeper than :data:`MAX_DEPTH`."""
    limit = MAX_BYTES[kind]
    if len(data) > limit:
        raise LimitError(1, f"{len(data) / (1 << 20):.1f} MB, larger than the {limit >> 20} MB npu-migrate "
                            "reads in one file; skipped")
    pattern = _PATTERNS.get(kind)
    if pattern is None:
        return
    text = data.decode("latin-1") if isinstance(data, bytes) else data
    deepest = DEPTHS.get(kind, MAX_DEPTH)
    depth = 0
    for match in pattern.finditer(text):
        if match.lastgroup == "open":
            depth += 1
            if depth > deepest:
                line = text.count("\n", 0, match.start()) + 1
                raise LimitError(line, f"nested more than {deepest} levels deep; skipped "
                                       "(npu-migrate's limit for this file type)")
        elif match.lastgroup == "close" and depth:
            depth -= 1
        elif match.lastgroup == "word" and _command_word(text, match.start()):
            if match.group() in _OPENERS:
                depth += 1
                if depth > deepest:
                    raise LimitError(text.count("\n", 0, match.start()) + 1,
                                     f"nested more than {deepest} levels deep; skipped "
                                     "(npu-migrate's limit for this file type)")
            elif depth:
                depth -= 1


def check_lines(data: bytes | str, kind: str) -> None:
    """The size limit alone (line-based formats: requirements files, setup.cfg)."""
    check(data, kind)


#: Peak memory of the Python front end per source line: 10.6 KB a line measured on
#: a file of short lines (``bench/python_memory.py``), of which libcst's own parse
#: is 9.0 KB (the floor: the engine parses with libcst); 12 KB with a margin.
PYTHON_BYTES_PER_LINE = 12 << 10


def memory_limit() -> int | None:
    """Bytes this process may still allocate: the soft ``RLIMIT_AS`` less what it has
    mapped already, else the machine's physical memory (None where unknown)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS) if resource is not None else (None, None)
    if soft is not None and soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm", encoding="ascii") as statm:
                mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            mapped = 0
        return max(0, soft - mapped)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def out_of_memory(data: bytes, needed: int | None = None) -> str:
    """The one-line message for a file that does not fit in memory (without the path)."""
    limit = memory_limit()
    lines = data.count(b"\n") + 1
    size = f"about {needed >> 20} MB for {lines} lines" if needed is not None else f"{len(data) / (1 << 20):.1f} MB file"
    bound = f"limit {limit >> 20} MB" if limit is not None else "no limit known"
    return f"not migrated: out of memory ({size}, {bound}); skipped"


def check_python_memory(data: bytes) -> None:
    """Raise :class:`LimitError` if a Python file would need more memory than this
    process may use (:data:`PYTHON_BYTES_PER_LINE` per line), before it is parsed."""
    needed = (data.count(b"\n") + 1) * PYTHON_BYTES_PER_LINE
    limit = memory_limit()
    if limit is not None and needed > limit:
        raise LimitError(1, out_of_memory(data, needed))


#: CPU seconds tree-sitter may parse for one file (the shell front end parses a template
#: three times, a notebook each ``%%bash`` cell): files that parse take well under 1 s per
#: MB (2 MB of torchrun lines: 0.5 s), while 330 KB of ``P=<ROOT>`` lines, each before a
#: command, took 35 s a parse (round 6; quadratic: 2 MB would take hours).
MAX_PARSE_SECONDS = 10.0
#: and more for a larger file: tree-sitter-json takes about 0.1 s per MB of a notebook of
#: printed lines (33 MB: 2.9 s), and a notebook may hold 128 MB
PARSE_SECONDS_PER_MB = 0.3
_PARSE_CHUNK = 1 << 12
#: the parse seconds the current file has spent (``parse_budget``), a list to add to
_SPENT: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("npu_migrate_parse_spent", default=None)


@contextlib.contextmanager
def parse_budget():
    """One file's parses share :data:`MAX_PARSE_SECONDS` (the runner opens one per file)."""
    token = _SPENT.set([0.0])
    try:
        yield
    finally:
        _SPENT.reset(token)


def parse_bounded(parser, data: bytes, what: str):
    """``parser.parse(data)``, given up with a :class:`LimitError` once the file's parses
    (:func:`parse_budget`; this parse alone outside one) have taken
    :data:`MAX_PARSE_SECONDS` of CPU, plus :data:`PARSE_SECONDS_PER_MB` of ``data``.
    (Read through a callback, the only form whose parse tree-sitter checks for
    progress; the tree is the same.)"""
    spent = _SPENT.get() or [0.0]
    start = time.process_time()
    allowed = MAX_PARSE_SECONDS + PARSE_SECONDS_PER_MB * len(data) / (1 << 20)
    left = allowed - spent[0]

    def read(offset: int, _point) -> bytes:
        return data[offset : offset + _PARSE_CHUNK]

    def past_budget(_offset: int, _has_error: bool) -> bool:
        return time.process_time() - start > left

    try:
        return parser.parse(read, progress_callback=past_budget)
    except ValueError:  # tree-sitter: "Parsing failed", the callback gave up
        parser.reset()
        raise LimitError(1, f"the {what} parser did not finish within {allowed:.0f} s of CPU "
                            f"(many lines that are not {what}, such as a template's placeholders?); "
                            "skipped") from None
    finally:
        spent[0] += time.process_time() - start
