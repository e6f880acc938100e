"""tree-sitter with its bash grammar, created once per process.

``included_ranges`` lets the Dockerfile front end parse only the shell parts of
a Dockerfile (the ``RUN`` commands without their ``\\``-continued comment lines)
while node offsets stay those of the whole file.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter


@functools.cache
def _parser() -> tree_sitter.Parser:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@functools.lru_cache(maxsize=4)
def _lines(data: bytes):
    """The line index of ``data``, kept for the next calls: the Dockerfile front end parses
    one ``RUN`` instruction at a time, and counting line ends from the file's start for
    each made a 1 MB Dockerfile of RUN lines take 29 s (round 5)."""
    from npu_migrate.pipeline.edits import LineIndex

    return LineIndex(data)


def point(data: bytes, offset: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column) of ``offset``."""
    index = _lines(data)
    line = index.line(offset)
    return line - 1, offset - index.line_start(line)


def parse(data: bytes, ranges: list[tuple[int, int]] | None = None) -> tree_sitter.Tree:
    """Parse ``data`` (only the byte ranges given, if any)."""
    from npu_migrate.pipeline.limits import parse_bounded

    parser = _parser()
    if not ranges:
        return parse_bounded(parser, data, "shell")
    import tree_sitter

    parser.included_ranges = [
        tree_sitter.Range(point(data, start), point(data, end), start, end) for start, end in ranges
    ]
    try:
        return parse_bounded(parser, data, "shell")
    finally:
        parser.reset()
        parser.included_ranges = [tree_sitter.Range((0, 0), (0xFFFFFFFF, 0xFFFFFFFF), 0, 0xFFFFFFFF)]
