"""``# npu-migrate: ignore`` and ``# npu-migrate: ignore[NPU101,NPU2]`` comments.

A suppression applies to fixes and findings that start on the same line. Codes
are matched as prefixes, like ``--select``.
"""

from __future__ import annotations

import io
import tokenize

from npu_migrate.suppression import ALL, MARK, parse

__all__ = ["ALL", "is_suppressed", "suppressions"]


def suppressions(text: str) -> dict[int, frozenset[str]]:
    """Line number -> suppressed rule prefixes. Only real comments count."""
    if MARK not in text:
        return {}
    found: dict[int, frozenset[str]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return {}
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        codes = parse(token.string)
        if codes is not None:
            found[token.start[0]] = codes
    return found


def is_suppressed(table: dict[int, frozenset[str]], line: int, rule: str) -> bool:
    codes = table.get(line)
    return codes is not None and any(rule.startswith(code) for code in codes)
