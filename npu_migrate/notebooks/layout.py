"""Where each cell's ``source`` sits in the notebook's JSON, and how to write a new
one in the file's own layout.

Positions come from tree-sitter's JSON grammar (the config front end's JSON
reader). A new ``source`` keeps the form it had (a list of lines or one
string), the whitespace around and between its elements, and the text of every
line that did not change (escapes included); changed lines are written with
``json.dumps`` in the file's ``ensure_ascii`` style (nbformat writes UTF-8 as
is; a file that escapes non-ASCII characters keeps doing so).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from npu_migrate.configs import json_reader


@dataclass(frozen=True)
class Source:
    """The ``source`` value of one cell: its span and, for a list, its elements' spans."""

    start: int
    end: int
    elements: tuple[tuple[int, int], ...] | None  # None: a single string


def sources(data: bytes) -> dict[int, Source]:
    """Cell index -> the position of its ``source`` value."""
    tree = json_reader.parse(data)
    root = next((c for c in tree.root_node.named_children if c.type == "object"), None)
    found: dict[int, Source] = {}
    if root is None:
        return found
    cells = _value(root, "cells")
    if cells is None or cells.type != "array":
        return found
    for index, cell in enumerate(c for c in cells.named_children if c.type != "comment"):
        value = _value(cell, "source") if cell.type == "object" else None
        if value is None:
            continue
        if value.type == "array":
            elements = tuple((e.start_byte, e.end_byte) for e in value.named_children if e.type == "string")
            found[index] = Source(value.start_byte, value.end_byte, elements)
        elif value.type == "string":
            found[index] = Source(value.start_byte, value.end_byte, None)
    return found


def cell_texts(data: bytes) -> dict[int | None, str]:
    """Cell number (1-based, as findings name cells) -> the cell's source text
    (positions after ``--write`` are mapped cell by cell:
    ``npu_migrate/reporting/relocate.py``)."""
    try:
        cells = json.loads(data)["cells"]
    except (ValueError, KeyError, TypeError):
        return {}
    return {i: "".join(c.get("source", "")) if isinstance(c.get("source"), list) else c.get("source", "")
            for i, c in enumerate(cells, start=1) if isinstance(c, dict)}


def _value(obj, key: str):
    for pair in obj.named_children:
        if pair.type == "pair" and json_reader.string_value(pair.child_by_field_name("key")) == key:
            return pair.child_by_field_name("value")
    return None


def ascii_style(data: bytes) -> bool:
    """Whether the file escapes non-ASCII characters (``json.dumps``' default)."""
    return data.isascii() and b"\\u" in data


def render(data: bytes, source: Source, old_text: str, new_text: str, ensure_ascii: bool | None = None) -> bytes:
    """The bytes that replace ``data[source.start:source.end]``. ``ensure_ascii``:
    :func:`ascii_style` of ``data``, which reads the whole file; a caller rendering
    many cells computes it once."""
    if ensure_ascii is None:
        ensure_ascii = ascii_style(data)
    if source.elements is None:
        return json.dumps(new_text, ensure_ascii=ensure_ascii).encode()
    old_lines = old_text.splitlines(keepends=True)
    new_lines = new_text.splitlines(keepends=True)
    raw = [data[s:e] for s, e in source.elements]
    if len(raw) != len(old_lines):  # an unusual split of the lines: write every element anew
        raw = [json.dumps(line, ensure_ascii=ensure_ascii).encode() for line in old_lines]
    pieces: list[bytes] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pieces.extend(raw[i1:i2])
        else:
            pieces.extend(json.dumps(line, ensure_ascii=ensure_ascii).encode() for line in new_lines[j1:j2])
    if source.elements:
        first, last = source.elements[0], source.elements[-1]
        opening = data[source.start + 1 : first[0]]
        closing = data[last[1] : source.end - 1]
        between = data[first[1] : source.elements[1][0]] if len(source.elements) > 1 else _guess(opening)
    else:
        opening, closing, between = b"\n", b"\n", b",\n"
    return b"[" + opening + between.join(pieces) + closing + b"]"


def _guess(opening: bytes) -> bytes:
    """The separator of a list that had one element: a comma, then what opened it."""
    return b"," + opening if opening.strip() == b"" and opening else b", "
