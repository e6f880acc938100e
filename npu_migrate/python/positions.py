"""Line and column of nodes, without generating the code of the whole module.

libcst's PositionProvider finds positions by generating the code of the whole
module while counting lines. The engine needs positions only for the few nodes
that were fixed or reported, and it already has CPython's ``ast`` of the file,
which knows on which line every statement starts. So for a node it generates
the code of its innermost enclosing statement alone and shifts the result to
where ``ast`` says that statement starts.

The innermost statement is found by walking down from the module-level statement
that holds the node, in libcst's tree and ``ast``'s side by side: at each
compound statement, the block that holds the node (body, ``elif``/``else``,
handlers, ``finally``, cases) and the statement in it. The statement is then
generated inside one stand-in ``if`` per enclosing block, each with that block's
own indentation, so that columns come out as in the file; only that statement
and the stand-in headers are generated, however large the function around it.

libcst groups ``a = 1; b = 2`` into one statement where ``ast`` has two; the
grouping is redone here. Where the two trees still disagree at some level (a
different count of statements in a block, or a line the reduced module of
``elision`` does not keep), the statement found so far is used, down to the
module-level one; a node outside any statement, or a module whose top level
does not fit, goes to the whole-module provider. ``tests/engine/test_positions.py``
compares the result with the whole-module provider for every node of every
fixture.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from npu_migrate.python.elision import first_line

_COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
    ast.With, ast.AsyncWith, ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
    *((ast.Match,) if hasattr(ast, "Match") else ()),
)
_TRY = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


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


def _ast_blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists of a compound statement in the order of the source (empty
    ``else``/``finally`` left out)."""
    if isinstance(node, _TRY):
        return [b for b in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody) if b]
    if hasattr(ast, "Match") and isinstance(node, ast.Match):
        return []  # its cases carry an indentation of their own: the whole `match` is generated
    return [b for b in (getattr(node, "body", None), getattr(node, "orelse", None)) if isinstance(b, list) and b]


def _cst_blocks(node: cst.CSTNode) -> list[cst.BaseSuite | cst.If]:
    """The blocks of a compound statement in the same order as :func:`_ast_blocks`: suites,
    and an ``elif`` (an ``If`` in ``orelse``), which ``ast`` holds as a one-statement list
    (none for ``match``, as in :func:`_ast_blocks`)."""
    if isinstance(node, (cst.Try, cst.TryStar)):
        parts = [node.body, *(h.body for h in node.handlers), node.orelse and node.orelse.body,
                 node.finalbody and node.finalbody.body]
    elif isinstance(node, (cst.If, cst.For, cst.While)):
        orelse = node.orelse
        parts = [node.body, orelse.body if isinstance(orelse, cst.Else) else orelse]
    elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.With)):
        parts = [node.body]
    else:
        parts = []
    return [p for p in parts if p]


def relined(where: CodeRange, line: Callable[[int], int]) -> CodeRange:
    """``where`` with both line numbers passed through ``line`` (columns unchanged)."""
    return CodeRange(CodePosition(line(where.start.line), where.start.column),
                     CodePosition(line(where.end.line), where.end.column))


@dataclass
class Starts:
    """The module's top-level statements as libcst groups them: the line each starts
    on, in the parsed module's coordinates, and its first ``ast`` statement, whose
    nested lines go through ``line_of`` into the same coordinates."""

    top: list[int]
    nodes: Sequence[ast.stmt] = ()
    line_of: Callable[[int], int | None] | None = None

    @classmethod
    def of(cls, tree: ast.Module) -> Starts:
        groups = _grouped(tree.body)
        return cls([line for line, _ in groups], [node for _, node in groups])

    def moved(self, line_of: Callable[[int], int | None]) -> Starts | None:
        """The same starts in other coordinates (None if a top-level start has none)."""
        top = [line_of(line) for line in self.top]
        if None in top:
            return None
        return Starts(top, self.nodes, line_of)

    def line(self, original: int) -> int | None:
        return original if self.line_of is None else self.line_of(original)


class StatementPositions:
    """Positions per innermost statement, shifted to where that statement starts.

    ``starts`` are in the parsed module's own coordinates; ``whole`` resolves a
    node through the whole-module provider (for nodes outside any statement, or
    when ``starts`` does not fit the module).
    """

    def __init__(self, module: cst.Module, starts: Starts, whole: Callable[[cst.CSTNode], CodeRange]) -> None:
        self._module = module
        self._starts = starts
        fits = len(starts.top) == len(module.body)
        self._top = {id(statement): index for index, statement in enumerate(module.body)} if fits else {}
        self._whole = whole
        #: id(statement) -> (its positions, line shift); the statement is kept alive in the value
        self._cache: dict[int, tuple[dict, int, cst.CSTNode]] = {}

    def get(self, node: cst.CSTNode, chain: Sequence[cst.CSTNode]) -> CodeRange:
        """Where ``node`` is; ``chain``: the node, then its ancestors up to the module."""
        found = self._innermost(chain)
        if found is None:
            return self._whole(node)
        statement, line, indents = found
        held = self._cache.get(id(statement))
        if held is None:
            held = self._cache[id(statement)] = (*self._generate(statement, line, indents), statement)
        where = held[0].get(node)
        if where is None:
            return self._whole(node)
        shift = held[1]
        return relined(where, lambda n: n + shift)

    def _innermost(self, chain: Sequence[cst.CSTNode]) -> tuple[cst.CSTNode, int, tuple] | None:
        """(innermost statement holding the chain's node whose start line is known, that
        line, the indentation of each block around it below the module)."""
        if len(chain) < 2 or chain[-1] is not self._module:
            return None
        index = self._top.get(id(chain[-2]))
        if index is None:
            return None
        statement, line = chain[-2], self._starts.top[index]
        tree: ast.stmt | None = self._starts.nodes[index] if self._starts.nodes else None
        found = (statement, line, ())
        indents: tuple = ()
        position = len(chain) - 2
        while tree is not None and position > 0:
            blocks = _cst_blocks(statement)
            trees = _ast_blocks(tree)
            if len(blocks) != len(trees):
                break
            # The next statement down the chain, and the block that holds it.
            below = next((i for i in range(position - 1, -1, -1) if isinstance(chain[i], cst.BaseStatement)), None)
            if below is None:
                break
            child = chain[below]
            for block, body in zip(blocks, trees):
                if block is child:  # an elif
                    statements, indent = [child], None
                    break
                if isinstance(block, cst.IndentedBlock) and chain[below + 1] is block:
                    statements, indent = block.body, block
                    break
            else:
                break
            groups = _grouped(body)
            if len(groups) != len(statements):
                break
            at = next(i for i, s in enumerate(statements) if s is child)
            line = self._starts.line(groups[at][0])
            if line is None:
                break
            statement, tree, position = child, groups[at][1], below
            if indent is not None:
                indents = (*indents, indent.indent)
            if indent is not None:  # an elif alone would be generated as `if`
                found = (statement, line, indents)
        return found

    def _generate(self, statement: cst.CSTNode, line: int, indents: tuple) -> tuple[dict, int]:
        if not indents:
            alone = self._module.with_changes(body=[statement], header=(), footer=())
            positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
            # In ``alone`` the statement's own leading lines (comments, blank lines) come first.
            return positions, line - (1 + len(statement.leading_lines))
        wrapped: cst.BaseStatement = statement
        for indent in reversed(indents):  # one stand-in `if` per block, with its indentation
            wrapped = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[wrapped], indent=indent))
        alone = self._module.with_changes(body=[wrapped], header=(), footer=())
        positions = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        first = statement.decorators[0] if getattr(statement, "decorators", None) else statement
        return positions, line - positions[first].start.line
