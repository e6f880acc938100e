"""Text that reaches a terminal: a log line or a log's file name with control characters
escaped, so that it cannot retitle, clear or rewrite the terminal it is shown on."""

from __future__ import annotations

import re

#: Characters a terminal acts on: C0 controls but tab (ESC, BEL, CR, LF, backspace...),
#: DEL, C1 controls (CSI U+009B, OSC U+009D...), and the bidirectional marks and
#: overrides that reorder what is shown, and the lone surrogates U+DC80..U+DCFF that stand
#: for the undecodable bytes of a file name (os.fsdecode): written out, they are the raw
#: bytes again (0x9b is CSI on an 8-bit terminal), or an encoding error.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\udc80-\udcff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    if 0xDC80 <= code <= 0xDCFF:  # the byte a file name held: shown as that byte
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with terminal control characters escaped (``\\x1b``, ``\\u202e``); tabs and
    printable characters are kept. JSON output needs none of this: JSON escapes them."""
    return _UNSAFE.sub(_escaped, text)
