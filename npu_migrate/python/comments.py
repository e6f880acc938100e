"""Trailing comments of rewritten lines that list the old values.

A line such as nanoGPT's ``device = 'cuda' # examples: 'cpu', 'cuda', 'cuda:0'`` or
``backend = 'nccl' # 'nccl', 'gloo', etc.`` documents the values its literal may take.
When a rule rewrites the literal (``'cuda'`` -> ``'npu'``), the comment would list the
old value as the one in use; a person editing the line would update it. The apply step
(:class:`npu_migrate.python.apply.EditApplier`) calls :func:`follow_rewrites` for every
statement line it rebuilt, whatever rule rewrote it:

* only *quoted* values in the comment change (``'cuda'``, ``"nccl"``), and only those
  that a string literal of the same line was rewritten from, to what it was rewritten
  to; a device type also carries its indexed forms (``'cuda:0'`` -> ``'npu:0'``);
* prose is left alone (``# move to cuda``, ``# allow tf32 on cudnn``): whether it still
  holds is for the reader, and the tool never guesses;
* a value that would appear twice after the update (``# 'nccl' or 'hccl'``) is left
  as it was, with the whole comment: the comment then compares the two.
"""

from __future__ import annotations

import re

import libcst as cst

_QUOTED = re.compile(r"""(['"])([^'"\s]+)\1""")


def _strings(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class _Collect(cst.CSTVisitor):
        def visit_SimpleString(self, string: cst.SimpleString) -> None:
            value = string.evaluated_value
            found.append(value if isinstance(value, str) else "")

    node.visit(_Collect())
    return found


def rewritten_values(original: cst.CSTNode, updated: cst.CSTNode) -> dict[str, str]:
    """old -> new for the string literals of the line that a rewrite changed (in order;
    nothing when the number of literals changed, where pairing them would be a guess)."""
    before, after = _strings(original), _strings(updated)
    if len(before) != len(after):
        return {}
    mapping = {}
    for old, new in zip(before, after):
        if old != new and old and new and ":" not in old and _QUOTED.fullmatch(f"'{old}'"):
            mapping[old] = new
    return mapping


def update_comment(comment: str, mapping: dict[str, str]) -> str:
    """``comment`` with each quoted old value (and ``old:N``) replaced by its new value."""
    if not mapping:
        return comment

    def swap(match: re.Match) -> str:
        quote, value = match.groups()
        base, colon, index = value.partition(":")
        if base in mapping and (not colon or index.isdigit()):
            return f"{quote}{mapping[base]}{colon}{index}{quote}"
        return match.group()

    updated = _QUOTED.sub(swap, comment)
    values = [m.group(2) for m in _QUOTED.finditer(updated)]
    if len(values) != len(set(values)) and len(set(values)) < len({m.group(2) for m in _QUOTED.finditer(comment)}):
        return comment  # the comment named both; it compares them
    return updated


def follow_rewrites(original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """``updated`` with its trailing comment following the literals rewritten on it."""
    comment = updated.trailing_whitespace.comment
    if comment is None or original.trailing_whitespace.comment is None:
        return updated
    mapping = rewritten_values(original.with_changes(trailing_whitespace=cst.TrailingWhitespace()),
                               updated.with_changes(trailing_whitespace=cst.TrailingWhitespace()))
    text = update_comment(comment.value, mapping)
    if text == comment.value:
        return updated
    return updated.with_changes(trailing_whitespace=updated.trailing_whitespace.with_changes(comment=cst.Comment(text)))
