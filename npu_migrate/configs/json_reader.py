"""JSON files, read with tree-sitter's JSON grammar (exact byte positions).

JSON with comments (JSONC: VS Code's ``settings.json`` and ``launch.json``,
``.devcontainer/devcontainer.json``, ``tsconfig.json``) is accepted: ``//`` and
``/* */`` comments and trailing commas before ``}`` or ``]``. Trailing commas
are found in tree-sitter's first parse (an ERROR node or bare ``,`` token
followed by a closing bracket), blanked to spaces in a copy of the same length
and parsed again, so every byte offset is the original file's and edits keep
the commas and comments. Python's dialect is read too: ``NaN``, ``Infinity`` and
``-Infinity`` (what ``json.dump`` writes for float results, and ``json.load``
reads) are blanked the same way to a number of the same length (``0``) before
that second parse. Other syntax errors are refused. String values are decoded
with the standard library's ``json``.
"""

from __future__ import annotations

import functools
import json
import re

from npu_migrate.configs.document import Document, ReadError, Scalar
from npu_migrate.pipeline import limits

_MARK_WORD = b"npu-migrate"
#: Strings and comments (skipped) or Python's non-finite number tokens (group 1).
_NON_FINITE = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|(-?(?:NaN|Infinity))\b', re.DOTALL)


def _finite(data: bytes) -> bytes:
    """``data`` with every ``NaN`` / ``Infinity`` / ``-Infinity`` token outside strings and
    comments replaced by ``0`` and spaces (same length, so offsets stay the file's)."""
    if b"NaN" not in data and b"Infinity" not in data:
        return data
    out = bytearray(data)
    for match in _NON_FINITE.finditer(data):
        if match.group(1) is not None:
            start, end = match.span(1)
            out[start:end] = b"0" + b" " * (end - start - 1)
    return bytes(out)


@functools.cache
def parser():
    import tree_sitter
    import tree_sitter_json

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_json.language()))


def parse(data: bytes):
    """The tree-sitter tree of ``data``; ReadError names the first syntax error's line."""
    limits.check(data, "json")  # size and nesting first (LimitError): npu_migrate/pipeline/limits.py
    tree = limits.parse_bounded(parser(), data, "JSON")
    if tree.root_node.has_error:
        finite = _finite(data)
        first = limits.parse_bounded(parser(), finite, "JSON") if finite is not data else tree
        if not first.root_node.has_error:
            return first
        commas = _trailing_commas(first.root_node)
        if commas:
            blanked = bytearray(finite)
            for offset in commas:
                blanked[offset] = 0x20
            again = limits.parse_bounded(parser(), bytes(blanked), "JSON")
            if not again.root_node.has_error:
                return again
        raise ReadError(_first_error(tree.root_node), "not valid JSON", syntax=True)
    return tree


def _tokens(node):
    """The tokens of the tree in order, comments and zero-width (missing) nodes left
    out; an ERROR node that holds only a comma is one ``,`` token."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "ERROR" and current.text.strip() == b",":
            yield b",", current.start_byte + current.text.index(b",")
        elif current.child_count == 0:
            if current.type != "comment" and current.end_byte > current.start_byte:
                yield current.type.encode(), current.start_byte
        else:
            stack.extend(reversed(current.children))


def _trailing_commas(root) -> list[int]:
    """Offsets of the commas after a value that the next token closes (``[1, 2,]``,
    ``{"a": 1,}``; not ``[,]``)."""
    found, before, previous = [], None, None
    for kind, start in _tokens(root):
        if (kind in (b"}", b"]") and previous is not None and previous[0] == b","
                and before is not None and before[0] not in (b"[", b"{", b",")):
            found.append(previous[1])
        before, previous = previous, (kind, start)
    return found


def _first_error(node) -> int:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "ERROR" or current.is_missing:
            return current.start_point.row + 1
        stack.extend(reversed([c for c in current.children if c.has_error or c.is_missing or c.type == "ERROR"]))
    return node.start_point.row + 1


def string_value(node) -> str | None:
    try:
        value = json.loads(node.text)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def read(data: bytes) -> Document:
    tree = parse(data)
    document = Document("JSON", comment=None)
    stack: list[tuple[object, tuple[str, ...]]] = [(tree.root_node, ())]
    while stack:
        node, keys = stack.pop()
        kind = node.type
        if kind == "string":
            _string(document, node, keys, False)
        elif kind == "pair":
            key, value = node.child_by_field_name("key"), node.child_by_field_name("value")
            name = string_value(key) if key is not None else None
            if name is None:
                continue
            _string(document, key, (*keys, name), True)
            if value is not None:
                stack.append((value, (*keys, name)))
        elif kind in ("document", "object", "array"):
            stack.extend((child, keys) for child in reversed(node.named_children))
    return document


def _string(document: Document, node, keys: tuple[str, ...], is_key: bool) -> None:
    text = node.text
    if _MARK_WORD in text:
        document.strings_with_marks.append((node.start_byte, node.end_byte))
    value = string_value(node)
    if value is None:
        return
    quote = '"' if text == f'"{value}"'.encode() else None  # escapes in the text: reported, never rewritten
    document.scalars.append(Scalar(value, node.start_byte, node.end_byte, keys, is_key, quote))
