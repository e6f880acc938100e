"""Qualified-name resolution for the rules.

Rules ask "what does this ``Name`` / ``Attribute`` refer to?" and get a dotted
qualified name such as ``torch.cuda.synchronize``, resolved through aliases
(``import torch.cuda as tc``), from-imports (``from torch.cuda import
synchronize``) and nested imports.

Two resolvers answer the same question:

* :class:`ImportTableResolver` reads the file's own import statements. It costs
  one pass over the import statements and is what runs by default.
* :class:`ScopeResolver` uses libcst's ``QualifiedNameProvider`` (scope analysis).
  It is exact, and about 3x the cost of parsing the file.

The engine starts with the import table and records every local name it relied
on. If any of those names is also bound by something other than an import in
the same file (a parameter or variable called ``torch``, an alias imported twice
with different targets), the file is re-run with :class:`ScopeResolver`. The
two are checked against each other by ``tests/engine/test_names.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper, QualifiedNameProvider, QualifiedNameSource

from npu_migrate.python.cst_util import from_import_names
from npu_migrate.python.visitors import CachedVisitorLookup


def dotted_name(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a chain of Attribute/Name nodes, else None."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return get_full_name_for_node(node)
    return None


def _module_name(node: cst.BaseExpression) -> str:
    return get_full_name_for_node(node) or ""


class ImportTable:
    """Local name -> qualified name, from every import statement in a module."""

    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}
        self.conflicting: set[str] = set()
        #: roots only a star import binds (:func:`star_bound_roots`)
        self.star_bound: set[str] = set()

    def bind(self, local: str, qualified: str) -> None:
        previous = self.bindings.get(local)
        if previous is not None and previous != qualified:
            self.conflicting.add(local)
        self.bindings[local] = qualified

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None:
                    self.bind(_module_name(alias.asname.name), full)
                else:
                    root = full.split(".", 1)[0]
                    self.bind(root, root)
            return
        for _, qualified, local in from_import_names(node):
            self.bind(local, qualified)

    def imports_module(self, module: str) -> bool:
        """True if ``module`` (or a submodule of it) is imported somewhere."""
        return any(q == module or q.startswith(module + ".") for q in self.bindings.values())


def _suites(statement: cst.CSTNode):
    """The suites (indented or one-line bodies) directly inside a compound statement."""
    for attr in ("body", "orelse", "finalbody"):
        child = getattr(statement, attr, None)
        if isinstance(child, cst.BaseSuite):
            yield child
        elif isinstance(child, (cst.Else, cst.Finally)):
            yield child.body
        elif isinstance(child, cst.If):  # elif
            yield from _suites(child)
    for part in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
        yield part.body


def _statement_imports(statements, table: ImportTable) -> None:
    """Walk statement bodies only (imports never live inside expressions): a plain
    loop is far cheaper than a libcst visitor over the whole tree."""
    for statement in statements:
        if isinstance(statement, (cst.Import, cst.ImportFrom)):
            table.add(statement)
        elif isinstance(statement, cst.SimpleStatementLine):
            _statement_imports(statement.body, table)
        elif isinstance(statement, cst.BaseCompoundStatement):
            for suite in _suites(statement):
                _statement_imports(suite.body, table)


#: Roots a module may take from a star import (``from finetune.run_classifier import *``,
#: whose module imports torch): the only one the rules act on by name
_STAR_ROOTS = ("torch",)


def star_bound_roots(tree: ast.Module | None) -> frozenset[str]:
    """The roots of :data:`_STAR_ROOTS` that ``tree`` reads but never binds itself, in a
    module that star-imports at its top level: there only the star import can bind them.

    TencentPretrain's finetune scripts read ``torch`` through ``from finetune.run_classifier
    import *``. Unresolved, ``torch.cuda.is_available()`` stayed while the ``"cuda"`` it
    chooses (which reaches ``.to()``) was rewritten: ``"npu" if torch.cuda.is_available()``
    (held-out round 24). A module that binds the name itself in any way (an import, an
    assignment, a parameter, a loop target, a definition) is not counted: then the name
    may be that binding, and the exact resolver decides as before."""
    if tree is None or not any(isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names)
                               for s in tree.body):
        return frozenset()
    read: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".", 1)[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
    return frozenset(root for root in _STAR_ROOTS if root in read and root not in bound)


def build_import_table(module: cst.Module, has_nested_imports: bool,
                       star_roots: frozenset[str] = frozenset()) -> ImportTable:
    table = _import_table(module, has_nested_imports)
    for root in star_roots:
        table.bind(root, root)
        table.star_bound.add(root)
    return table


def _import_table(module: cst.Module, has_nested_imports: bool) -> ImportTable:
    table = ImportTable()
    if has_nested_imports:
        _statement_imports(module.body, table)
        return table
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    table.add(small)
        elif isinstance(stmt, (cst.If, cst.Try)):
            # `try: import x / except ImportError` and `if TYPE_CHECKING:` blocks.
            _statement_imports([stmt], table)
    return table


#: Top-level packages whose names rules act on. A shadowed or conflicting root only
#: forces the exact resolver when it resolves into one of these; a try/except
#: fallback such as ``try: from datasets import Dataset / except: Dataset = None``
#: is common in real code and irrelevant to the migration.
WATCHED_PACKAGES = frozenset({
    "torch", "torch_npu", "npu_runtime", "os", "subprocess", "argparse",
    "apex", "flash_attn", "xformers", "triton", "bitsandbytes", "cupy", "pynvml", "nvidia",
    "deepspeed", "transformer_engine", "tensorrt", "accelerate",
})


class ImportTableResolver:
    exact = False

    def __init__(self, table: ImportTable) -> None:
        self.table = table
        self.roots_used: set[str] = set()

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        target = self.table.bindings.get(root)
        if target is None or root in self.table.conflicting:
            return None  # two different imports: QualifiedNameProvider would not decide either
        if target.split(".", 1)[0] in WATCHED_PACKAGES:
            self.roots_used.add(root)
        return f"{target}.{rest}" if rest else target


class ScopeResolver:
    """Exact resolution through libcst's QualifiedNameProvider."""

    exact = True

    def __init__(self, wrapper: MetadataWrapper, star_bound: Iterable[str] = ()) -> None:
        self._names = wrapper.resolve(QualifiedNameProvider)
        self.roots_used: set[str] = set()
        self._star_bound = frozenset(star_bound)

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        value = self._names.get(node, ())
        if callable(value):  # libcst >= 1.2 resolves this provider lazily
            value = value()
        names = {q.name for q in value if q.source is QualifiedNameSource.IMPORT}
        if len(names) == 1:
            return names.pop()
        if not value and self._star_bound:
            # a root only a star import binds (nothing in the module binds it otherwise)
            dotted = dotted_name(node)
            if dotted is not None and dotted.split(".", 1)[0] in self._star_bound:
                return dotted
        return None


class BindingCollector(CachedVisitorLookup, cst.BatchableCSTVisitor):
    """Collects names bound inside functions, lambdas, classes and comprehensions
    by anything other than an import statement.

    Only those can shadow a module-level import at the place it is used. A
    module-level rebinding (``try: import x / except ImportError: x = None``)
    does not need the exact resolver: QualifiedNameProvider reports both the
    import and the assignment there, and the engine acts on the import either way.
    """

    _SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self._depth = 0

    def _enter(self) -> None:
        self._depth += 1

    def _leave(self, original_node: cst.CSTNode) -> None:
        self._depth -= 1

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = lambda self, node: self._enter()
    leave_Lambda = leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = _leave
    leave_FunctionDef = leave_ClassDef = _leave

    def _targets(self, node: cst.CSTNode | None) -> None:
        if node is None or not self._depth:
            return
        if isinstance(node, cst.Name):
            self.bound.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._targets(element.value)
        elif isinstance(node, cst.StarredElement):
            self._targets(node.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._targets(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._targets(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._targets(node.name.name)

    def visit_Param(self, node: cst.Param) -> None:
        self.bound.add(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._targets(node.name)
        self._enter()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._targets(node.name)
        self._enter()

    def visit_Global(self, node: cst.Global) -> None:
        self.bound.update(n.name.value for n in node.names)

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self._targets(node.name)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._targets(node.name)


def ambiguous_roots(roots_used: Iterable[str], table: ImportTable, bound: set[str]) -> set[str]:
    """Roots whose meaning the import table alone cannot vouch for."""
    return {r for r in roots_used if r in bound}
