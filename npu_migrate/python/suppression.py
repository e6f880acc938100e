"""Suppression comments: ``# npu-migrate: ignore``, ``# npu-migrate: ignore[NPU101,NPU2]``
and ``# noqa: NPU101``.

A suppression applies to fixes and findings that start on the same line. Codes
are matched as prefixes, like ``--select``.

``# noqa`` is honoured only with NPU codes (``# noqa: NPU101``, ``# noqa: E501,
NPU2``), as ruff users write it; a bare ``# noqa`` is left to the linter it was
written for, because a line that silences flake8 or ruff is no reason to leave
CUDA code unmigrated. Codes that name no rule (``ignore[NPU999]``, ``noqa: NPU99``)
suppress nothing and are reported (NPU001), as ruff reports unknown noqa codes.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

_MARKS = ("npu-migrate:", "noqa")
_COMMENT = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")
#: flake8's syntax: codes after ``noqa:`` separated by commas and/or spaces. Any word
#: counts as a code here, so that a mistyped ``NPU1O1`` is reported, not half-read.
_NOQA = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Za-z]\w*(?:[\s,]+[A-Za-z]\w*)*)", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z0-9_]+")
_NPU = re.compile(r"NPU", re.IGNORECASE)

ALL = frozenset({""})  # the empty prefix matches every rule


@dataclass(frozen=True)
class BadCode:
    """A code in a suppression comment that names no rule (1-based line, 0-based columns)."""

    line: int
    col: int
    end_col: int
    code: str
    comment: str


@dataclass
class Suppressions:
    lines: dict[int, frozenset[str]] = field(default_factory=dict)
    bad: list[BadCode] = field(default_factory=list)


def _codes(token: tokenize.TokenInfo, match: re.Match, noqa: bool, known: list[str] | None, out: Suppressions) -> frozenset[str]:
    codes = []
    for code in _CODE.finditer(match.group("codes")):
        value = code.group().strip().upper()
        if noqa and not value.startswith("NPU"):
            continue  # another linter's code
        codes.append(value)
        if known is not None and not any(rule.startswith(value) for rule in known):
            col = token.start[1] + match.start("codes") + code.start()
            out.bad.append(BadCode(token.start[0], col, col + len(code.group()), code.group(), match.group().strip()))
    return frozenset(codes)


def parse(text: str, known: list[str] | None = None) -> Suppressions:
    """The suppressions of ``text``; with ``known`` (rule ids), also the codes that name
    none of them. Only real comments count (never a ``#`` inside a string)."""
    found = Suppressions()
    if not any(mark in text for mark in _MARKS):
        return found
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        match = _COMMENT.search(token.string)
        if match:
            codes = match.group("codes")
            found.lines[line] = ALL if codes is None else _codes(token, match, False, known, found)
            continue
        match = _NOQA.search(token.string)
        if match and _NPU.search(match.group("codes")):
            codes = _codes(token, match, True, known, found)
            if codes:
                found.lines[line] = codes
    return found


def suppressions(text: str) -> dict[int, frozenset[str]]:
    """Line number -> suppressed rule prefixes."""
    return parse(text).lines


def may_have_bad_codes(text: str) -> bool:
    """A cheap test before :func:`parse` with ``known``: bad codes need an NPU code."""
    return _NPU.search(text) is not None and any(mark in text for mark in _MARKS)


def is_suppressed(table: dict[int, frozenset[str]], line: int, rule: str) -> bool:
    codes = table.get(line)
    return codes is not None and any(rule.startswith(code) for code in codes)
