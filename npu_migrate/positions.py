"""Line and column of nodes, without generating the code of the whole module.

libcst's PositionProvider finds positions by generating the code of the whole
module while counting lines. The engine needs positions only for the few nodes
that were fixed or reported, and it already has CPython's ``ast`` of the file,
which knows on which line every top-level statement starts. So for a node it
generates the code of its top-level statement alone (through the same
PositionProvider, on a one-statement module with the same indentation and
newline settings) and shifts the result to where that statement starts.

libcst groups ``a = 1; b = 2`` into one statement where ``ast`` has two; the
grouping is redone here, and when the counts still disagree the whole-module
provider answers instead. ``tests/engine/test_positions.py`` compares both for
every node of every fixture.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

_COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
    ast.With, ast.AsyncWith, ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
    *((ast.Match,) if hasattr(ast, "Match") else ()),
)


def statement_starts(tree: ast.Module) -> list[int]:
    """First line of each top-level statement, grouped as libcst groups them."""
    starts: list[int] = []
    previous_end, previous_simple = 0, False
    for node in tree.body:
        compound = isinstance(node, _COMPOUND)
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if previous_simple and not compound and first == previous_end:
            previous_end = node.end_lineno or first  # `a = 1; b = 2`: one SimpleStatementLine
            continue
        starts.append(first)
        previous_end, previous_simple = node.end_lineno or first, not compound
    return starts


class StatementPositions:
    """Positions per top-level statement, shifted to the statement's start line.

    ``starts`` are the statements' first lines in the parsed module's own
    coordinates; ``whole`` resolves a node through the whole-module provider
    (for nodes outside any statement, or when ``starts`` does not fit).
    """

    def __init__(self, module: cst.Module, starts: list[int],
                 whole: Callable[[cst.CSTNode], CodeRange]) -> None:
        self._module = module
        self._fits = len(starts) == len(module.body)
        self._start = dict(zip(map(id, module.body), starts)) if self._fits else {}
        self._whole = whole
        self._cache: dict[int, tuple[dict, int]] = {}

    def get(self, node: cst.CSTNode, statement: cst.CSTNode | None) -> CodeRange:
        start = self._start.get(id(statement)) if statement is not None else None
        if start is None:
            return self._whole(node)
        held = self._cache.get(id(statement))
        if held is None:
            alone = self._module.with_changes(body=[statement], header=(), footer=())
            positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
            # In ``alone`` the statement's own leading lines (comments, blank lines) come first.
            shift = start - (1 + len(statement.leading_lines))
            held = self._cache[id(statement)] = (positions, shift)
        positions, shift = held
        where = positions.get(node)
        if where is None:
            return self._whole(node)
        return CodeRange(
            CodePosition(where.start.line + shift, where.start.column),
            CodePosition(where.end.line + shift, where.end.column),
        )
