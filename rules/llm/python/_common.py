"""Shared by the Python rules of the LLM family: where a value is written
(keyword argument, attribute/key assignment, dict entry, parameter default),
and removing a keyword argument without leaving a stray comma."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from npu_migrate.python.cst_util import string_value


def literals(expr: cst.BaseExpression) -> Iterator[cst.SimpleString]:
    """The string literals an expression may evaluate to: the literal itself, or
    both branches of ``a if cond else b`` (nested)."""
    if isinstance(expr, cst.SimpleString) and string_value(expr) is not None:
        yield expr
    elif isinstance(expr, cst.IfExp):
        yield from literals(expr.body)
        yield from literals(expr.orelse)


def assigned_name(target: cst.BaseExpression) -> str | None:
    """``x`` for ``obj.x = ...`` / ``obj.a.x = ...`` and for ``kwargs["x"] = ...``."""
    if isinstance(target, cst.Attribute):
        return target.attr.value
    if isinstance(target, cst.Subscript) and len(target.slice) == 1:
        index = target.slice[0].slice
        if isinstance(index, cst.Index):
            return string_value(index.value)
    return None


def values_for(node: cst.CSTNode, names: frozenset[str]) -> Iterator[cst.BaseExpression]:
    """The expressions ``node`` writes under one of ``names``: ``f(name=v)``,
    ``obj.name = v`` / ``d["name"] = v``, ``{"name": v}``, ``dict(name=v)``,
    ``def f(name=v)``."""
    if (
        (isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in names)
        or (isinstance(node, cst.Assign) and any(assigned_name(t.target) in names for t in node.targets))
        or (isinstance(node, cst.DictElement) and string_value(node.key) in names)
    ):
        yield node.value
    elif isinstance(node, cst.Param) and node.default is not None and node.name.value in names:
        yield node.default


def without_keyword(call: cst.Call, keyword: str) -> cst.Call:
    """``call`` without its ``keyword=`` argument. The comma of a removed last
    argument moves to the new last one, so ``f(a, b=1)`` gives ``f(a)`` and a
    trailing comma before a closing line stays where it was."""
    args = list(call.args)
    index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == keyword), None)
    if index is None:
        return call
    removed = args.pop(index)
    if index == len(args) and args:
        args[-1] = args[-1].with_changes(comma=removed.comma)
    return call.with_changes(args=args)
