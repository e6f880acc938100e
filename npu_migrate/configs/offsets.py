"""Character offsets (what PyYAML and tomlkit count) to byte offsets (what the edits use)."""

from __future__ import annotations

import bisect


class CharToByte:
    """Converts character offsets of ``text`` to byte offsets of its UTF-8 encoding."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ascii = text.isascii()
        if not self.ascii:
            # Line starts in characters and in bytes, to encode at most one line per lookup.
            self.chars = [0]
            self.bytes = [0]
            offset = 0
            for line in text.splitlines(keepends=True):
                offset += len(line.encode("utf-8", "surrogatepass"))
                self.chars.append(self.chars[-1] + len(line))
                self.bytes.append(offset)

    def __call__(self, index: int) -> int:
        if self.ascii:
            return index
        line = bisect.bisect_right(self.chars, index) - 1
        start = self.chars[line]
        return self.bytes[line] + len(self.text[start:index].encode("utf-8", "surrogatepass"))
