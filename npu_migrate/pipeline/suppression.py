"""``# npu-migrate: ignore``, ``# npu-migrate: ignore[NPU101,NPU2]`` and
``# noqa: NPU101`` comments, for every file type that has comments.

Codes are prefixes, as in ``--select``; a bare ``ignore`` suppresses every rule.
``# noqa`` counts only with NPU codes (``# noqa: E501, NPU101``, as ruff users
write it): a bare ``# noqa`` was written for another linter, and leaving CUDA
code unmigrated because of it would be silent. Codes that name no rule suppress
nothing; :func:`bad_codes` finds them so that they are reported (NPU001).
Each front end finds the real comments of its format (never text that merely
looks like one inside a string) and says which lines a comment covers:

* a comment after code covers its own line (every front end);
* a comment on a line of its own covers the whole statement that follows it,
  where the format cannot put a comment at the end of every line of a
  statement: shell commands continued with ``\\``, Dockerfile instructions
  (ShellCheck's ``# shellcheck disable=`` and hadolint's ``# hadolint ignore=``
  work the same way).

The Python front end keeps Python's convention (same line only,
``npu_migrate/python/suppression.py``).
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")
#: flake8's syntax: codes after ``noqa:`` separated by commas and/or spaces. Any word
#: counts as a code here, so that a mistyped ``NPU1O1`` is reported, not half-read.
_NOQA = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Za-z]\w*(?:[\s,]+[A-Za-z]\w*)*)", re.IGNORECASE)
_CODE = re.compile(r"\w+")

#: The rule that reports codes naming no rule.
RULE = "NPU001"

#: The empty prefix matches every rule.
ALL = frozenset({""})

MARK = "npu-migrate: ignore"
#: Words without which a text has no suppression comment (a cheap test first).
MARKS = (MARK, "noqa")


def _codes(comment: str) -> tuple[re.Match, bool] | None:
    """The match whose ``codes`` group holds the codes, and whether it is a noqa."""
    match = _COMMENT.search(comment)
    if match is not None:
        return match, False
    match = _NOQA.search(comment)
    if match is not None and any(c.upper().startswith("NPU") for c in _CODE.findall(match.group("codes"))):
        return match, True
    return None


def _own(match: re.Match, noqa: bool) -> list[re.Match]:
    """The code matches that are ours (a noqa's other codes belong to other linters)."""
    codes = _CODE.finditer(match.group("codes"))
    return [c for c in codes if not noqa or c.group().upper().startswith("NPU")]


def parse(comment: str) -> frozenset[str] | None:
    """The codes a comment suppresses (:data:`ALL` for a bare ``ignore``), or None
    when it is not a suppression comment."""
    found = _codes(comment)
    if found is None:
        return None
    match, noqa = found
    if match.group("codes") is None:
        return ALL
    return frozenset(c.group().upper() for c in _own(match, noqa))


def bad_codes(comment: str, known: list[str]) -> list[tuple[int, str, str]]:
    """Codes of a suppression comment that are neither a rule id in ``known`` nor the
    prefix of one: (offset in ``comment``, code, the suppression as written)."""
    found = _codes(comment)
    if found is None or found[0].group("codes") is None:
        return []
    match, noqa = found
    return [
        (match.start("codes") + code.start(), code.group(), match.group().strip())
        for code in _own(match, noqa)
        if not any(rule.startswith(code.group().upper()) for rule in known)
    ]


def describe(code: str, written: str) -> tuple[str, str]:
    """NPU001's message and suggestion for ``code`` in the suppression ``written``."""
    return (f"`{code}` in `{written}` is not a rule code or prefix; it suppresses nothing",
            "use a code from 'npu-migrate rules' (prefixes such as NPU1 work too), or remove it")


class Suppressions:
    """Line number (1-based) -> suppressed rule prefixes, and the suppression
    comments read (byte offset, text) so that their unknown codes are reported."""

    def __init__(self) -> None:
        self.lines: dict[int, frozenset[str]] = {}
        self.comments: list[tuple[int, str]] = []

    def read(self, offset: int, comment: str) -> frozenset[str] | None:
        """:func:`parse` for the comment starting at byte ``offset``, remembered for
        :meth:`bad`."""
        codes = parse(comment)
        if codes is not None:
            self.comments.append((offset, comment))
        return codes

    def bad(self, known: list[str]) -> list[tuple[int, str, str]]:
        """Codes that name no rule: (byte offset, code, the suppression as written)."""
        return [
            (offset + len(comment[:at].encode()), code, written)
            for offset, comment in self.comments
            for at, code, written in bad_codes(comment, known)
        ]

    def add(self, first: int, last: int, codes: frozenset[str]) -> None:
        for line in range(first, last + 1):
            self.lines[line] = self.lines.get(line, frozenset()) | codes

    def suppressed(self, line: int, rule: str) -> bool:
        codes = self.lines.get(line)
        return codes is not None and any(rule.startswith(code) for code in codes)

    def __bool__(self) -> bool:
        return bool(self.lines)
