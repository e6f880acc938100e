"""Line and column of nodes, without generating the code of the whole module.

libcst's PositionProvider finds positions by generating the code of the whole
module while counting lines. The engine needs positions only for the few nodes
that were fixed or reported, and it already has CPython's ``ast`` of the file,
which knows on which line every statement starts. So for a node it generates
the code of its top-level statement alone (through the same PositionProvider,
on a one-statement module with the same indentation and newline settings), or
for a node in a method of a top-level class, the class header with that one
method, and shifts the result to where that statement starts.

libcst groups ``a = 1; b = 2`` into one statement where ``ast`` has two; the
grouping is redone here, and when the counts still disagree the whole-module
provider answers instead. ``tests/engine/test_positions.py`` compares both for
every node of every fixture.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from npu_migrate.python.elision import first_line

_COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
    ast.With, ast.AsyncWith, ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
    *((ast.Match,) if hasattr(ast, "Match") else ()),
)


def _grouped(body: list[ast.stmt]) -> list[tuple[int, ast.stmt]]:
    """(first line, first ast statement) of each statement as libcst groups them."""
    groups: list[tuple[int, ast.stmt]] = []
    previous_end, previous_simple = 0, False
    for node in body:
        compound = isinstance(node, _COMPOUND)
        first = first_line(node)
        if previous_simple and not compound and first == previous_end:
            previous_end = node.end_lineno or first  # `a = 1; b = 2`: one SimpleStatementLine
            continue
        groups.append((first, node))
        previous_end, previous_simple = node.end_lineno or first, not compound
    return groups


def relined(where: CodeRange, line: Callable[[int], int]) -> CodeRange:
    """``where`` with both line numbers passed through ``line`` (columns unchanged)."""
    return CodeRange(CodePosition(line(where.start.line), where.start.column),
                     CodePosition(line(where.end.line), where.end.column))


def outer_statements(chain: list[cst.CSTNode], module: cst.Module) -> tuple[cst.CSTNode | None, cst.CSTNode | None]:
    """For ``chain`` (a node, then its ancestors up to ``module``): the module-level
    statement that holds the node and, if that is a class, the statement of its body
    that does (None where there is none)."""
    if len(chain) < 2 or chain[-1] is not module:
        return None, None
    top = chain[-2]
    if isinstance(top, cst.ClassDef) and len(chain) >= 4 and chain[-3] is top.body:
        return top, chain[-4]
    return top, None


@dataclass
class Starts:
    """First lines of the module's top-level statements, and of the statements in
    the body of each top-level class (keyed by the class's index)."""

    top: list[int]
    members: dict[int, list[int]]

    @classmethod
    def of(cls, tree: ast.Module) -> Starts:
        groups = _grouped(tree.body)
        members = {
            index: [line for line, _ in _grouped(node.body)]
            for index, (_, node) in enumerate(groups)
            if isinstance(node, ast.ClassDef)
        }
        return cls([line for line, _ in groups], members)

    def moved(self, line_of: Callable[[int], int | None]) -> Starts | None:
        """The same starts in other coordinates (None if a top-level start has none)."""
        top = [line_of(line) for line in self.top]
        if None in top:
            return None
        members = {}
        for index, lines in self.members.items():
            moved = [line_of(line) for line in lines]
            if None not in moved:
                members[index] = moved
        return Starts(top, members)


class StatementPositions:
    """Positions per top-level statement (per method, inside a top-level class),
    shifted to where that statement starts.

    ``starts`` are in the parsed module's own coordinates; ``whole`` resolves a
    node through the whole-module provider (for nodes outside any statement, or
    when ``starts`` does not fit the module).
    """

    def __init__(self, module: cst.Module, starts: Starts, whole: Callable[[cst.CSTNode], CodeRange]) -> None:
        self._module = module
        fits = len(starts.top) == len(module.body)
        self._start = dict(zip(map(id, module.body), starts.top)) if fits else {}
        self._members: dict[int, dict[int, int]] = {}
        if fits:
            for index, lines in starts.members.items():
                statement = module.body[index]
                if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock) \
                        and len(statement.body.body) == len(lines):
                    self._members[id(statement)] = dict(zip(map(id, statement.body.body), lines))
        self._whole = whole
        self._cache: dict[int, tuple[dict, int]] = {}

    def get(self, node: cst.CSTNode, statement: cst.CSTNode | None, member: cst.CSTNode | None = None) -> CodeRange:
        held = None
        if statement is not None and member is not None:
            held = self._member(statement, member)
        if held is None and statement is not None:
            held = self._statement(statement)
        where = held[0].get(node) if held is not None else None
        if where is None:
            return self._whole(node)
        shift = held[1]
        return relined(where, lambda line: line + shift)

    def _statement(self, statement: cst.CSTNode) -> tuple[dict, int] | None:
        start = self._start.get(id(statement))
        if start is None:
            return None
        held = self._cache.get(id(statement))
        if held is None:
            alone = self._module.with_changes(body=[statement], header=(), footer=())
            positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
            # In ``alone`` the statement's own leading lines (comments, blank lines) come first.
            held = self._cache[id(statement)] = (positions, start - (1 + len(statement.leading_lines)))
        return held

    def _member(self, cls: cst.CSTNode, member: cst.CSTNode) -> tuple[dict, int] | None:
        start = self._members.get(id(cls), {}).get(id(member))
        if start is None:
            return None
        held = self._cache.get(id(member))
        if held is None:
            # The class header with this one member, so that indentation comes out as in the file.
            wrapper = cls.with_changes(leading_lines=(), decorators=(), lines_after_decorators=(),
                                       body=cls.body.with_changes(body=[member], footer=()))
            alone = self._module.with_changes(body=[wrapper], header=(), footer=())
            positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
            first = member.decorators[0] if getattr(member, "decorators", None) else member
            held = self._cache[id(member)] = (positions, start - positions[first].start.line)
        return held
