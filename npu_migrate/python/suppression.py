"""Suppression comments in Python files (the forms: ``npu_migrate/pipeline/suppression.py``).

A suppression applies to fixes and findings that start on the same line, as
``# noqa`` does for linters. Only real comments count: tokenize tells them from
a ``#`` inside a string.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from npu_migrate.pipeline.suppression import ALL, MARKS, bad_codes

_NPU = re.compile("npu", re.IGNORECASE)

__all__ = ["ALL", "BadCode", "Found", "is_suppressed", "may_have_bad_codes", "parse", "suppressions"]


@dataclass(frozen=True)
class BadCode:
    """A code in a suppression comment that names no rule (1-based line, 0-based columns)."""

    line: int
    col: int
    end_col: int
    code: str
    comment: str


@dataclass
class Found:
    lines: dict[int, frozenset[str]] = field(default_factory=dict)
    bad: list[BadCode] = field(default_factory=list)


def parse(text: str, known: list[str] | None = None) -> Found:
    """The suppressions of ``text``; with ``known`` (rule ids), also the codes that
    name none of them."""
    from npu_migrate.pipeline.suppression import parse as parse_comment

    found = Found()
    if not any(mark in text for mark in MARKS):
        return found
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        codes = parse_comment(token.string)
        if codes is None:
            continue
        line, col = token.start
        found.lines[line] = codes
        for offset, code, comment in bad_codes(token.string, known) if known is not None else ():
            found.bad.append(BadCode(line, col + offset, col + offset + len(code), code, comment))
    return found


def suppressions(text: str) -> dict[int, frozenset[str]]:
    """Line number -> suppressed rule prefixes."""
    return parse(text).lines


def may_have_bad_codes(text: str) -> bool:
    """A cheap test before :func:`parse` with ``known``: a bad code needs a mark and "NPU"."""
    return any(mark in text for mark in MARKS) and _NPU.search(text) is not None


def is_suppressed(table: dict[int, frozenset[str]], line: int, rule: str) -> bool:
    codes = table.get(line)
    return codes is not None and any(rule.startswith(code) for code in codes)
