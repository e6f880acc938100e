"""TOML files, read with tomlkit (the style-preserving TOML library).

tomlkit reproduces a file byte for byte but does not say where an item sits.
The reader finds out the tomlkit way: it swaps every string item for a unique
marker, renders the document once, reads the markers' offsets (minus the
length difference of the markers before them) and puts the original items back.
A document that would not render back to its own bytes is refused (that would
be a tomlkit bug; nothing is edited then).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from npu_migrate.configs.document import Document, ReadError, Scalar, decode
from npu_migrate.configs.offsets import CharToByte
from npu_migrate.pipeline import limits

_MARK_WORD = "npu-migrate"
_QUOTES = {"SLB": '"', "SLL": "'", "MLB": '"""', "MLL": "'''"}


def parse(text: str):
    import tomlkit
    from tomlkit.exceptions import ParseError

    limits.check(text, "toml")  # size and nesting first (LimitError): npu_migrate/pipeline/limits.py
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise ReadError(exc.line or 1, f"not valid TOML: {str(exc).split(' at line ')[0]}", syntax=True) from None
    except RecursionError:
        raise ReadError(1, "too deeply nested for the TOML parser") from None


def leaves(container, keys: tuple[str, ...] = ()) -> Iterator[tuple[object, object, tuple[str, ...]]]:
    """``(container, key or index, keys)`` of every value that is not a table or an
    array (strings, numbers, booleans, dates), in the order tomlkit keeps them."""
    from tomlkit.items import AoT, Array, InlineTable, Item, Table

    entries = enumerate(container) if isinstance(container, Array) else ((k, _item(container, k)) for k in list(container.keys()))
    for key, item in entries:
        if not isinstance(item, (Item, Mapping)):
            continue  # a boolean of an out-of-order table, which tomlkit only hands out unwrapped
        path = keys if isinstance(key, int) else (*keys, str(key))
        if isinstance(item, AoT):
            for table in item:
                yield from leaves(table, path)
        elif isinstance(item, (Table, InlineTable, Array, Mapping)):
            yield from leaves(item, path)
        else:
            yield container, key, path


def _item(container, key):
    """The tomlkit item (tables hand out booleans unwrapped; ``item()`` does not)."""
    getter = getattr(container, "item", None)
    return getter(key) if getter is not None and not isinstance(key, int) else container[key]


def locate(document, text: str, found: list[tuple[object, object, tuple[str, ...]]]) -> list[tuple[int, int]]:
    """Character ranges of the items ``found`` in ``text`` (the document's own text)."""
    from tomlkit.items import String, StringType

    originals = [_item(container, key) for container, key, _ in found]
    markers = [f"npu-migrate-marker-{index}-x" for index in range(len(found))]
    try:
        for (container, key, _), marker in zip(found, markers, strict=True):
            container[key] = String.from_raw(marker, StringType.SLB)
        rendered = document.as_string()
    finally:
        for (container, key, _), original in zip(found, originals, strict=True):
            container[key] = original
    if document.as_string() != text:
        raise ReadError(1, "tomlkit cannot reproduce this file exactly; left unchanged")
    # One pass for all markers (``str.index`` per marker was quadratic in the file's items).
    positions = sorted((match.start(), int(match[1])) for match in _MARKER.finditer(rendered))
    if len(positions) != len(markers):
        raise ReadError(1, "tomlkit cannot reproduce this file exactly; left unchanged")
    ranges: list[tuple[int, int]] = [(0, 0)] * len(found)
    shift = 0
    for at, index in positions:
        raw = originals[index].as_string()
        ranges[index] = (at - shift, at - shift + len(raw))
        shift += len(markers[index]) + 2 - len(raw)
    return ranges


_MARKER = re.compile(r'"npu-migrate-marker-(\d+)-x"')
_KEY_SEPARATOR = re.compile(r"[ \t]*=[ \t]*")


def read(data: bytes) -> Document:
    from tomlkit.items import Array, String

    text = decode(data)
    document = parse(text)
    found = list(leaves(document))
    result = Document("TOML")
    if not found:
        return result
    to_byte = CharToByte(text)
    for (container, key, keys), (start, end) in zip(found, locate(document, text, found), strict=True):
        item = _item(container, key)
        if not isinstance(container, Array):
            _key(result, text, to_byte, str(key), keys, start)
        if not isinstance(item, String):
            continue
        raw = text[start:end]
        if _MARK_WORD in raw:
            result.strings_with_marks.append((to_byte(start), to_byte(end)))
        quote = _QUOTES.get(item.type.name)
        if quote is None or raw != f"{quote}{item.value}{quote}":
            quote = None
        result.scalars.append(Scalar(str(item.value), to_byte(start), to_byte(end), keys, False, quote))
    result.scalars.sort(key=lambda s: (s.start, not s.is_key))
    return result


def _key(result: Document, text: str, to_byte: CharToByte, name: str, keys: tuple[str, ...], value_start: int) -> None:
    """The key of the value at ``value_start``: the last spelling of it before the ``=``
    on the value's line (a bare key is editable, a quoted one is only reported)."""
    line_start = text.rfind("\n", 0, value_start) + 1
    for raw, quote in ((name, ""), (f'"{name}"', None), (f"'{name}'", None)):
        at = text.rfind(raw, line_start, value_start)
        if at != -1 and _KEY_SEPARATOR.fullmatch(text, at + len(raw), value_start):
            result.scalars.append(Scalar(name, to_byte(at), to_byte(at + len(raw)), keys, True, quote))
            return
