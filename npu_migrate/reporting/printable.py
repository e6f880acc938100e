"""Text from a repository made safe to print on a terminal or in a CI log.

File names, error messages and findings quote what a repository holds: a file named
``"a\\n::error file=x::y.py"`` printed as it is starts a GitHub Actions workflow command
on a line of its own in a text run's log, and ``"\\x1b]0;t\\x07"`` retitles the terminal.
Every human format (text, grouped, markdown) and the github format print those strings
through :func:`printable`. The diff is not: it is the files' own bytes, as ``git diff``
prints them, and must still apply.

The same characters as ``diagnose``'s text output escapes (``npu_runtime.diagnose.cli.safe``):
C0 controls but tab (newline and carriage return included: a printed name or message is
one line), DEL, C1 controls, and the bidirectional overrides that reorder what is shown.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: what ``json.dumps(ensure_ascii=False)`` leaves raw in strings (it escapes C0 itself)
_JSON_RAW = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with terminal and line controls escaped (``\\x1b``, ``\\x0a``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def json_safe(document: str) -> str:
    """A JSON document (``json.dumps(..., ensure_ascii=False)``) with the controls JSON
    leaves raw (DEL, C1, the bidirectional overrides) written as ``\\uXXXX`` escapes: the
    same data, and nothing a terminal acts on. They can only stand inside strings."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}", document) if _JSON_RAW.search(document) else document
