"""Straight-line reasoning over statement blocks, for NPU401: which ``name = ...``
statement a use of ``name`` sees, and whether one statement runs before another.

No data-flow framework: the questions are asked about a handful of statements per
file, and answered conservatively (None / False when in doubt).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

#: compound statements whose body runs after their header, at most once per pass
_PASS_THROUGH = (cst.If, cst.With)
_LOOPS = (cst.For, cst.While)


def block_body(ctx, statement: cst.CSTNode) -> Sequence[cst.BaseStatement] | None:
    """The statement list ``statement`` sits in (a module's or an indented block's)."""
    block = ctx.parent(statement)
    if isinstance(block, (cst.Module, cst.IndentedBlock)):
        return block.body
    return None


def index_in(body: Sequence[cst.CSTNode], node: cst.CSTNode) -> int:
    return next(i for i, item in enumerate(body) if item is node)


def inside(ctx, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    return node is outer or any(a is outer for a in ctx.ancestors(node))


def child_in(ctx, node: cst.CSTNode, body: Sequence[cst.CSTNode]) -> cst.CSTNode | None:
    """The statement of ``body`` that is or contains ``node``."""
    members = {id(item) for item in body}
    for candidate in (node, *ctx.ancestors(node)):
        if id(candidate) in members:
            return candidate
    return None


def single_assign(statement: cst.CSTNode, name: str) -> cst.Assign | None:
    """``statement`` as ``name = value`` (one target, one statement on the line)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
        and assign.targets[0].target.value == name
    ):
        return assign
    return None


def reaching_assign(
    ctx, use: cst.CSTNode, name: str, bindings: Iterable[cst.CSTNode]
) -> cst.Assign | None:
    """The ``name = value`` statement whose value ``name`` holds at ``use``.

    Walks back over the statements before ``use`` in its block, then out through
    the ``if``/``else``/``with``/loop statements and ``try`` bodies around it, up to
    the function or module. ``bindings`` are the nodes that bind ``name`` in that scope (libcst's
    ScopeProvider). The first preceding statement that binds ``name`` decides: it is
    the answer when it is a plain ``name = value`` line, else None. A loop around
    the use that binds ``name`` anywhere is None too (a later iteration may see
    that binding).
    """
    bindings = list(bindings)
    statement = ctx.enclosing_statement(use)
    current: cst.CSTNode | None = statement
    while current is not None:
        body = block_body(ctx, current)
        if body is None:
            return None
        for sibling in reversed(body[: index_in(body, current)]):
            if any(inside(ctx, b, sibling) for b in bindings):
                return single_assign(sibling, name)
        block = ctx.parent(current)
        owner = ctx.parent(block)
        if isinstance(owner, cst.Else):
            owner = ctx.parent(owner)
            if isinstance(owner, cst.Try):
                return None  # a try's else: its body may have bound the name
        while isinstance(owner, cst.If) and isinstance(ctx.parent(owner), cst.If):
            owner = ctx.parent(owner)  # an elif: the chain starts at the outer `if`
        if isinstance(owner, _LOOPS):
            if any(inside(ctx, b, owner) for b in bindings):
                return None
        elif isinstance(owner, cst.Try):
            if owner.body is not block:
                return None  # an except or finally block: how much of the try ran is unknown
        elif not isinstance(owner, _PASS_THROUGH):
            return None  # function, class, match...: stop there
        current = owner
    return None
