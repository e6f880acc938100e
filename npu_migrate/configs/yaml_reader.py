"""YAML files (Hydra and OmegaConf configs included), read with PyYAML's composer.

Composing builds the node graph without constructing Python objects, so custom
tags (``!!python/object``, ``!include``), interpolations (``${oc.env:X}``) and
duplicate keys are all fine.

Aliases are never expanded: the node graph PyYAML composes shares an anchored
node between its aliases, and :func:`read` visits each node once (a "billion
laughs" file of 10 levels of 9 aliases is 10 x 9 visits, not 9**10), and refuses,
with one line, a file that uses more than :data:`MAX_ALIASES` aliases. Each scalar node carries the marks (character
offsets) of its text; libyaml's marks are used only for ASCII files (it counts a
BOM and characters outside the BMP differently from PyYAML's pure-Python reader).
"""

from __future__ import annotations

import yaml

from npu_migrate.configs.document import Document, ReadError, Scalar, decode
from npu_migrate.configs.offsets import CharToByte
from npu_migrate.pipeline import limits

_MARK_WORD = "npu-migrate"


def _loader(text: str):
    if text.isascii() and getattr(yaml, "__with_libyaml__", False):
        return yaml.CSafeLoader
    return yaml.SafeLoader


def _quote(raw: str, value: str, style: str | None) -> str | None:
    for quote in ("'", '"') if style in ("'", '"') else ("",):
        if raw == f"{quote}{value}{quote}":
            return quote
    return None


def compose(text: str) -> list[yaml.Node]:
    """The root node of every document of ``text``; ReadError names the line of a
    syntax error."""
    limits.check(text, "yaml")  # size and nesting first (LimitError): npu_migrate/pipeline/limits.py
    try:
        return [root for root in yaml.compose_all(text, Loader=_loader(text)) if root is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise ReadError(line, f"not valid YAML: {exc.problem or exc.context or 'invalid'}", syntax=True) from None
    except yaml.YAMLError as exc:
        raise ReadError(1, f"not valid YAML: {str(exc).splitlines()[0]}", syntax=True) from None
    except RecursionError:
        raise ReadError(1, "too deeply nested for the YAML parser") from None


#: The most aliases (``*name``) one YAML file may use.
MAX_ALIASES = 10_000


def read(data: bytes) -> Document:
    text = decode(data)
    document = Document("YAML")
    to_byte = CharToByte(text)
    seen: set[tuple[int, bool]] = set()
    visited: set[int] = set()
    aliases = [0]

    def scalar(node: yaml.ScalarNode, keys: tuple[str, ...], is_key: bool) -> None:
        start, end = node.start_mark.index, node.end_mark.index
        if (start, is_key) in seen:
            return  # an alias of a node already seen
        seen.add((start, is_key))
        raw = text[start:end]
        if _MARK_WORD in raw:
            document.strings_with_marks.append((to_byte(start), to_byte(end)))
        if not isinstance(node.value, str):
            return
        document.scalars.append(
            Scalar(node.value, to_byte(start), to_byte(end), keys, is_key, _quote(raw, node.value, node.style))
        )

    def visit(node: yaml.Node, keys: tuple[str, ...]) -> None:
        if id(node) in visited:  # an alias of a node already visited: nothing new in it
            aliases[0] += 1
            if aliases[0] > MAX_ALIASES:
                raise ReadError(node.start_mark.line + 1, f"more than {MAX_ALIASES} YAML aliases; skipped")
            return
        visited.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            scalar(node, keys, False)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                visit(item, keys)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                if isinstance(key, yaml.ScalarNode):
                    scalar(key, (*keys, name), True)
                else:
                    visit(key, keys)
                visit(value, (*keys, name))

    for root in compose(text):
        visit(root, ())
    document.scalars.sort(key=lambda s: (s.start, not s.is_key))
    return document
