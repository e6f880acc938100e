"""The read-only walk behind the batched rule pass.

``libcst.visit_batched`` goes through ``CSTNode.visit``, which is built for
transforms: on the way back up it rebuilds every node of the tree (and
validates it), even when every visitor only reads. On the files that reach the
rule pass that rebuilding was about half of the tool's time. This walk visits
the same nodes, in the same order, calling the same ``visit_<Node>`` /
``leave_<Node>`` methods of the same batchable visitors, and builds nothing.

What it leaves out on purpose: whitespace, comments, commas, brackets and
operator tokens (no rule reads them, and ``tests/engine/test_walk.py`` checks
that no rule or collector defines a visit method for one).

The order of a node's children is libcst's own: each node class's
``_visit_and_replace_children`` names its fields, as string constants, in the
order it visits them, so that order is read from its code object once per
class. ``tests/engine/test_walk.py`` compares the walk with libcst's visit on
every fixture.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

import libcst as cst

#: Node classes no rule looks at and that contain nothing a rule looks at.
TRIVIA_BASES: tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Newline,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.ImportStar,
    cst.Asynchronous,
)

_children_fields: dict[type, tuple[str, ...]] = {}


def _is_trivia(cls: type) -> bool:
    return issubclass(cls, TRIVIA_BASES)


def children_fields(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` that libcst visits, in its order (trivia fields dropped)."""
    fields = _children_fields.get(cls)
    if fields is None:
        names = {f.name for f in dataclasses.fields(cls)}
        ordered = [c for c in cls._visit_and_replace_children.__code__.co_consts if isinstance(c, str) and c in names]
        fields = tuple(dict.fromkeys(ordered))
        _children_fields[cls] = fields
    return fields


Hook = Callable[[cst.CSTNode], None]


class _Dispatch:
    """``visit_<Node>`` / ``leave_<Node>`` methods of every visitor, by node class."""

    def __init__(self, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
        self._by_name: dict[str, list[Callable]] = {}
        for visitor in visitors:
            for name, method in visitor.get_visitors().items():
                self._by_name.setdefault(name, []).append(method)
        self._visit: dict[type, tuple[Callable, ...]] = {}
        self._leave: dict[type, tuple[Callable, ...]] = {}

    def methods(self, cls: type) -> tuple[tuple[Callable, ...], tuple[Callable, ...]]:
        visit = self._visit.get(cls)
        if visit is None:
            visit = self._visit[cls] = tuple(self._by_name.get(f"visit_{cls.__name__}", ()))
            self._leave[cls] = tuple(self._by_name.get(f"leave_{cls.__name__}", ()))
        return visit, self._leave[cls]


def visit_batched(
    root: cst.CSTNode,
    visitors: Iterable[cst.BatchableCSTVisitor],
    before_visit: Hook | None = None,
    after_leave: Hook | None = None,
) -> None:
    """Like ``libcst.visit_batched`` for read-only visitors, without rebuilding the tree.

    Per node class, what the walk does with it (skip it as trivia, or its visit and
    leave methods and child fields) is worked out once; per child type, whether it is
    a node, a sequence or neither (``isinstance`` on libcst's abstract node class goes
    through ``ABCMeta`` each time: a third of this walk's own time on the dense
    corpus)."""
    dispatch = _Dispatch(list(visitors))
    plans: dict[type, tuple | None] = {}
    kinds: dict[type, int] = {}  # 1: a node, 2: a list or tuple, 0: anything else

    def plan(cls: type) -> tuple | None:
        if _is_trivia(cls):
            found = None
        else:
            visit, leave = dispatch.methods(cls)
            found = (visit, leave, children_fields(cls))
        plans[cls] = found
        return found

    def kind(value: object) -> int:
        cls = type(value)
        found = kinds[cls] = 1 if isinstance(value, cst.CSTNode) else 2 if isinstance(value, (tuple, list)) else 0
        return found

    def walk(node: cst.CSTNode) -> None:
        cls = type(node)
        how = plans[cls] if cls in plans else plan(cls)
        if how is None:
            return
        visit, leave, fields = how
        if before_visit is not None:
            before_visit(node)
        for method in visit:
            method(node)
        for name in fields:
            child = getattr(node, name)
            what = kinds.get(type(child))
            if what is None:
                what = kind(child)
            if what == 1:
                walk(child)
            elif what == 2:
                for item in child:
                    what = kinds.get(type(item))
                    if what is None:
                        what = kind(item)
                    if what == 1:
                        walk(item)
        for method in leave:
            method(node)
        if after_leave is not None:
            after_leave(node)

    walk(root)
