"""Shared by the LLM config rules: the literal written after a mapping key, for
values the readers do not hand to rules as string scalars (booleans, numbers)."""

from __future__ import annotations

import re

from npu_migrate.configs.document import Scalar

#: `: value` (YAML, JSON) or `= value` (TOML) right after a key, up to the end of the literal
_AFTER_KEY = re.compile(rb"[ \t]*[:=][ \t]*([A-Za-z0-9_.+-]+)(?=[ \t]*(?:[,}\]#\r\n]|//|$))")


def literal_after(data: bytes, key: Scalar) -> tuple[str, int, int] | None:
    """The plain literal a key holds (``true``, ``4``) with its byte range, else None."""
    if not key.is_key:
        return None
    match = _AFTER_KEY.match(data, key.end)
    if match is None:
        return None
    return match.group(1).decode("ascii"), match.start(1), match.end(1)


TRUE = frozenset({"true", "True", "TRUE", "yes", "Yes", "on", "On"})
