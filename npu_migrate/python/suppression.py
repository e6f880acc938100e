"""``# npu-migrate: ignore`` and ``# npu-migrate: ignore[NPU101,NPU2]`` comments.

A suppression applies to fixes and findings that start on the same line. Codes
are matched as prefixes, like ``--select``.
"""

from __future__ import annotations

import io
import re
import tokenize

_MARK = "npu-migrate: ignore"
_COMMENT = re.compile(r"#\s*npu-migrate:\s*ignore(?:\[(?P<codes>[A-Za-z0-9_,\s]*)\])?")

ALL = frozenset({""})  # the empty prefix matches every rule


def suppressions(text: str) -> dict[int, frozenset[str]]:
    """Line number -> suppressed rule prefixes. Only real comments count."""
    if _MARK not in text:
        return {}
    found: dict[int, frozenset[str]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return {}
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _COMMENT.search(token.string)
        if not match:
            continue
        codes = match.group("codes")
        if codes is None:
            found[token.start[0]] = ALL
        else:
            found[token.start[0]] = frozenset(c.strip() for c in codes.split(",") if c.strip())
    return found


def is_suppressed(table: dict[int, frozenset[str]], line: int, rule: str) -> bool:
    codes = table.get(line)
    return codes is not None and any(rule.startswith(code) for code in codes)
