"""``# npu-migrate: ignore`` and ``# npu-migrate: ignore[NPU101,NPU2]`` comments,
for every file type that has comments.

Codes are prefixes, as in ``--select``; a bare ``ignore`` suppresses every rule.
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

#: The empty prefix matches every rule.
ALL = frozenset({""})

MARK = "npu-migrate: ignore"


def parse(comment: str) -> frozenset[str] | None:
    """The codes a comment suppresses (:data:`ALL` for a bare ``ignore``), or None
    when it is not a suppression comment."""
    match = _COMMENT.search(comment)
    if match is None:
        return None
    codes = match.group("codes")
    if codes is None:
        return ALL
    return frozenset(c.strip().upper() for c in codes.split(",") if c.strip())


class Suppressions:
    """Line number (1-based) -> suppressed rule prefixes."""

    def __init__(self) -> None:
        self.lines: dict[int, frozenset[str]] = {}

    def add(self, first: int, last: int, codes: frozenset[str]) -> None:
        for line in range(first, last + 1):
            self.lines[line] = self.lines.get(line, frozenset()) | codes

    def suppressed(self, line: int, rule: str) -> bool:
        codes = self.lines.get(line)
        return codes is not None and any(rule.startswith(code) for code in codes)

    def __bool__(self) -> bool:
        return bool(self.lines)
