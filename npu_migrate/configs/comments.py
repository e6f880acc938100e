"""Suppression comments in YAML, TOML and the dependency files: ``# npu-migrate: ignore[NPU830]`` at the end
of a line covers that line (both formats allow a comment after every value, so a
comment is never needed on a line of its own). JSON has no comments.

A ``#`` is a comment where the parser did not see a string: the readers list the
strings that contain the marker's text, and a ``#`` inside one of them is text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from npu_migrate.configs.document import Document
from npu_migrate.pipeline.edits import LineIndex
from npu_migrate.pipeline.suppression import MARK, Suppressions

if TYPE_CHECKING:
    from npu_migrate.deps.model import DepsDocument


def find(data: bytes, document: Document | DepsDocument, lines: LineIndex, suppressions: Suppressions) -> None:
    if document.comment is None or MARK.encode() not in data:
        return
    marker = document.comment
    position = data.find(MARK.encode())
    while position != -1:
        line = lines.line(position)
        start = lines.line_start(line)
        text = lines.text(line)
        for index in range(len(text)):
            if not text.startswith(marker, index) or (index and text[index - 1 : index] not in b" \t"):
                continue
            offset = start + index
            if any(s <= offset < e for s, e in document.strings_with_marks):
                continue
            codes = suppressions.read(offset, text[index:].decode("utf-8", "replace"))
            if codes is not None:
                suppressions.add(line, line, codes)
            break  # the first real comment of the line is the only one
        next_line = start + len(text) + 1
        position = data.find(MARK.encode(), max(next_line, position + 1))
