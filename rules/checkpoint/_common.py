"""Helpers shared by the checkpoint rules (NPU4xx) and the sampler rules (NPU5xx)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import libcst as cst

T = TypeVar("T", cst.Arg, cst.DictElement, cst.StarredDictElement)


def _is_multiline(whitespace: cst.BaseParenthesizableWhitespace | None) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace)


def insert_item(
    items: Sequence[T],
    index: int,
    new: T,
    opening: cst.BaseParenthesizableWhitespace | None,
) -> list[T]:
    """``items`` (call arguments or dict elements) with ``new`` inserted after
    position ``index`` (``-1``: first), laid out like its neighbours.

    The separator after the new item copies the one after ``items[index]`` (so a
    trailing comma and a one-item-per-line layout stay as they were); an item that
    had no comma gets the separator that precedes it, or the whitespace after the
    opening bracket (``opening``) when it is the only item.
    """
    items = list(items)
    if not items:
        return [new]
    if index < 0:
        index = 0
        items.insert(0, new)
        first = items[1]
        sep = _separator_like(
            first.comma if isinstance(first.comma, cst.Comma) else None, opening
        )
        items[0] = new.with_changes(comma=sep)
        return items
    anchor = items[index]
    if index + 1 < len(items):
        # in the middle: the new item copies the separator that follows the anchor
        new = new.with_changes(comma=anchor.comma)
    else:
        # the anchor was last: it gets an item separator like the one before it, and
        # the new last item inherits the anchor's trailing comma (if any) and the
        # whitespace before the closing bracket
        previous = (
            items[index - 1].comma
            if index > 0 and isinstance(items[index - 1].comma, cst.Comma)
            else None
        )
        new = new.with_changes(comma=anchor.comma)
        if isinstance(anchor, cst.Arg):
            new = new.with_changes(whitespace_after_arg=anchor.whitespace_after_arg)
            anchor = anchor.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        items[index] = anchor.with_changes(comma=_separator_like(previous, opening))
    items.insert(index + 1, new)
    return items


def _separator_like(
    comma: cst.Comma | None, opening: cst.BaseParenthesizableWhitespace | None
) -> cst.Comma:
    if comma is not None:
        return comma
    if _is_multiline(opening):
        return cst.Comma(whitespace_after=opening)
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def quote_for(node: cst.CSTNode, default: str = '"') -> str:
    """The quote character to use for a new string inside ``node``: the one every
    plain string literal in it uses, else ``default`` (the file's, ``ctx.quote``)."""
    quotes: set[str] = set()

    class _Quotes(cst.CSTVisitor):
        def visit_SimpleString(self, string: cst.SimpleString) -> None:
            quotes.add(string.quote[0])

    node.visit(_Quotes())
    return quotes.pop() if len(quotes) == 1 else default


def dotted(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a chain of plain names, else None."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return cst.helpers.get_full_name_for_node(node)
    return None


def is_pure_reference(node: cst.CSTNode) -> bool:
    """A name, attribute chain or constant subscript of those: safe to evaluate twice."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Attribute):
        return is_pure_reference(node.value)
    if isinstance(node, cst.Subscript):
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return False
        index = node.slice[0].slice.value
        return isinstance(index, (cst.SimpleString, cst.Integer)) and is_pure_reference(
            node.value
        )
    return False


def has_star(call: cst.Call) -> bool:
    """``*args`` or ``**kwargs`` in the call: its arguments cannot be known."""
    return any(arg.star for arg in call.args)


def insert_above(
    rule,
    statement: cst.BaseStatement,
    new: cst.BaseStatement,
    message: str,
    anchor: cst.CSTNode,
) -> None:
    """Insert ``new`` right above ``statement``, under the blank lines and comments that
    were above it (they move onto ``new``: a "# resume from a checkpoint" comment stays
    at the top of its block). Same anchor and message for both edits: one fix."""
    if statement.leading_lines:
        rule.replace(
            statement,
            lambda line: line.with_changes(leading_lines=()),
            message,
            needs_torch_npu=False,
            anchor=anchor,
        )
    rule.insert_before(
        statement,
        [new.with_changes(leading_lines=statement.leading_lines)],
        message,
        anchor=anchor,
        needs_torch_npu=False,
    )
