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
    """``x`` for ``x = ...``, ``obj.x = ...`` / ``obj.a.x = ...`` and ``kwargs["x"] = ...``."""
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    if isinstance(target, cst.Subscript) and len(target.slice) == 1:
        index = target.slice[0].slice
        if isinstance(index, cst.Index):
            return string_value(index.value)
    return None


def values_for(node: cst.CSTNode, names: frozenset[str]) -> Iterator[cst.BaseExpression]:
    """The expressions ``node`` writes under one of ``names``: ``f(name=v)``,
    ``name = v`` / ``obj.name = v`` / ``d["name"] = v``, ``{"name": v}``, ``dict(name=v)``,
    ``def f(name=v)``, a dataclass field ``name: str = v`` / ``= field(default=v)``, and
    argparse's ``add_argument("--name", default=v)``."""
    if (
        (isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in names)
        or (isinstance(node, cst.Assign) and any(assigned_name(t.target) in names for t in node.targets))
        or (isinstance(node, cst.DictElement) and string_value(node.key) in names)
    ):
        yield node.value
    elif isinstance(node, cst.Param) and node.default is not None and node.name.value in names:
        yield node.default
    elif isinstance(node, cst.AnnAssign) and node.value is not None and assigned_name(node.target) in names:
        value = node.value
        if isinstance(value, cst.Call):  # field(default="...")
            yield from (a.value for a in value.args if a.keyword is not None and a.keyword.value == "default")
        else:
            yield value
    elif isinstance(node, cst.Call) and _option_name(node) in names:
        yield from (a.value for a in node.args if a.keyword is not None and a.keyword.value == "default")


def _option_name(call: cst.Call) -> str | None:
    """``attn_implementation`` for ``parser.add_argument("--attn_implementation", ...)``
    (also ``--attn-implementation``)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
        return None
    for arg in call.args:
        if arg.keyword is None and (text := string_value(arg.value)) is not None and text.startswith("--"):
            return text[2:].replace("-", "_")
    return None


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
