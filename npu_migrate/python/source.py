"""Reading source bytes and turning decode/parse problems into one-line errors."""

from __future__ import annotations

import io
import tokenize


class SourceError(Exception):
    """A problem with one input file; ``str()`` is the one-line message."""


def decode(path: str, data: bytes) -> str:
    """Decode like Python does (BOM, PEP 263 cookie, default utf-8)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"{path}:1: cannot decode: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError(f"{path}:{line}: cannot decode as {encoding}: byte {data[exc.start]:#04x} is invalid") from None
    except LookupError:
        raise SourceError(f"{path}:1: unknown source encoding {encoding!r}") from None
