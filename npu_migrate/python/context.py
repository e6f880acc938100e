"""Per-file state shared by every rule in one batched pass.

Metadata is resolved lazily and at most once per file: most files that pass the
prefilter need qualified names and parents only; positions are resolved once,
after the pass, for the nodes that were fixed or reported; scopes only when a
rule asks for them.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import (
    Assignment,
    CodeRange,
    GlobalScope,
    MetadataWrapper,
    PositionProvider,
    ScopeProvider,
)

from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.target import NPU, Target
from npu_migrate.python.elision import Reduced
from npu_migrate.python.names import ImportTable, ImportTableResolver, ScopeResolver
from npu_migrate.python.positions import Starts, StatementPositions, relined
from npu_migrate.python.records import Edit, FindingRecord, ImportRequest


def _by_type(classes) -> Callable[[object], bool]:
    """``isinstance(value, classes)``, answered once per type: libcst's node classes
    are ``ABCMeta`` classes, whose ``isinstance`` is slow, and these checks run for
    every node of the rule walk."""
    known: dict[type, bool] = {}

    def check(value: object) -> bool:
        cls = type(value)
        found = known.get(cls)
        if found is None:
            found = known[cls] = isinstance(value, classes)
        return found

    return check


_is_import = _by_type((cst.Import, cst.ImportFrom))
_is_attribute = _by_type(cst.Attribute)


@dataclass
class FileContext:
    path: str
    text: str
    wrapper: MetadataWrapper
    imports: ImportTable
    resolver: ImportTableResolver | ScopeResolver
    facts: ProjectFacts = field(default_factory=ProjectFacts)
    #: Set when the parsed module is a reduced copy of the file (positions map back).
    reduced: Reduced | None = None
    #: Where statements start in the parsed module (from ``ast``), which lets positions
    #: be found statement by statement; None: whole-module positions.
    statement_starts: Starts | None = None
    #: CPython's ``ast`` of the whole original file, when the engine already has it.
    python_tree: ast.Module | None = None
    #: Ids of the rules selected for this file (a rule may defer to another one).
    active: frozenset[str] = frozenset()
    #: What CUDA becomes (npu_migrate/pipeline/target.py).
    target: Target = NPU
    edits: list[Edit] = field(default_factory=list)
    findings: list[FindingRecord] = field(default_factory=list)
    import_requests: list[ImportRequest] = field(default_factory=list)
    #: Set by NPU100: the file already uses the NPU API (what, for the message)
    #: without importing torch_npu.
    uses_npu_unimported: str | None = None
    _parents: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    _stack: list[cst.CSTNode] = field(default_factory=list)
    _positions: object = None
    _statement_positions: StatementPositions | None = None
    _scopes: object = None
    _local_scopes: dict[cst.CSTNode, object] = field(default_factory=dict)
    _names: dict[cst.CSTNode, str | None] = field(default_factory=dict)
    _import_nodes: set[cst.CSTNode] = field(default_factory=set)
    _import_depth: int = 0
    _python_tree_failed: bool = False
    _quote: str | None = None
    _cuda_only_index: object = None
    #: names bound to skip marks of CUDA kernel tests (``cuda_backend._kernel_skip_names``)
    _kernel_skip_names: frozenset[str] | None = None
    #: cuda_backend.region's verdict per simple statement (file_region's under the module),
    #: and the generated code of a block
    _statement_regions: dict[cst.CSTNode, object] = field(default_factory=dict)
    _block_code: dict[cst.CSTNode, str] = field(default_factory=dict)
    #: the names each of those blocks assigns, lower case (None: a name is not ASCII)
    _block_assigned: dict[cst.CSTNode, set[str] | None] = field(default_factory=dict)

    @property
    def module(self) -> cst.Module:
        return self.wrapper.module

    # -- traversal bookkeeping (called by the engine around the batched visit) ------

    def before_visit(self, node: cst.CSTNode) -> None:
        if self._stack:
            self._parents[node] = self._stack[-1]
        self._stack.append(node)
        if _is_import(node):
            self._import_depth += 1
        if self._import_depth:
            self._import_nodes.add(node)

    def after_leave(self, node: cst.CSTNode) -> None:
        self._stack.pop()
        if _is_import(node):
            self._import_depth -= 1

    def in_import(self, node: cst.CSTNode) -> bool:
        """True for nodes inside an ``import`` / ``from ... import`` statement."""
        return node in self._import_nodes

    def is_outermost(self, node: cst.CSTNode) -> bool:
        """Only the longest dotted chain counts: ``torch.cuda.synchronize``, not ``torch.cuda``."""
        parent = self._parents.get(node)
        return not (_is_attribute(parent) and parent.value is node)

    def use_name(self, node: cst.CSTNode) -> str | None:
        """Qualified name of an outermost Name/Attribute read outside import statements
        (the shape most rules match on), else None."""
        if not self.is_outermost(node) or node in self._import_nodes:
            return None
        return self.qualified_name(node)

    # -- metadata ------------------------------------------------------------------

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """Dotted qualified name of a Name/Attribute *read* (``torch.cuda.synchronize``),
        resolved through the file's imports; None for anything else."""
        try:
            return self._names[node]
        except KeyError:
            pass
        if isinstance(node, cst.Name) and not self._is_access(node):
            name = None
        else:
            name = self.resolver.qualified_name(node)
        self._names[node] = name
        return name

    def _is_access(self, node: cst.Name) -> bool:
        parent = self._parents.get(node)
        if isinstance(parent, cst.Attribute):
            return parent.value is node
        if isinstance(parent, (cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName)):
            return not (getattr(parent, "keyword", None) is node or getattr(parent, "name", None) is node)
        return True

    @property
    def quote(self) -> str:
        """The quote character new strings get: the one most of the file's one-line
        string literals use (double quotes on a tie, black's and ruff's default)."""
        if self._quote is None:
            self._quote = preferred_quote(self.text)
        return self._quote

    def python_ast(self) -> ast.Module | None:
        """CPython's ``ast`` of the whole original file (never the reduced module elision
        parses); None when CPython cannot parse it."""
        if self.python_tree is None and not self._python_tree_failed:
            try:
                self.python_tree = ast.parse(self.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._python_tree_failed = True
        return self.python_tree

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self._parents.get(node)
        while current is not None:
            yield current
            current = self._parents.get(current)

    def enclosing_statement(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement (simple line or compound) that contains ``node``."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, cst.BaseStatement):
            current = self._parents.get(current)
        return current

    def scope(self, node: cst.CSTNode):
        """libcst ScopeProvider scope of ``node`` (resolved on first use)."""
        if self._scopes is None:
            self._scopes = self.wrapper.resolve(ScopeProvider)
        return self._scopes.get(node)

    def local_scope(self, node: cst.CSTNode):
        """The ScopeProvider scope of ``node`` for following a *local* name to its uses:
        the same scope objects as :meth:`scope` gives for the names bound inside a
        function, but computed on the outermost function that holds ``node`` alone
        (a module made of that one ``def``), once per function; outside functions, on
        the outermost class that holds it. A name bound in a function is read only
        inside it (closures and nested classes included), one bound in a class body
        only in that body, so its assignments and references are the same; a
        ``global`` statement in it would bind module names, so then (and at module
        level, or once the whole-module scopes exist) the whole module is analysed. Scope analysis of
        the whole module costs several passes over it; a dense file asks about a
        few functions (``docs/benchmarks.md``, "No file slower than linear")."""
        if self._scopes is not None:
            return self._scopes.get(node)
        function = node if isinstance(node, cst.FunctionDef) else None
        cls = node if isinstance(node, cst.ClassDef) else None
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
            elif isinstance(ancestor, cst.ClassDef):
                cls = ancestor
        outer = function or cls
        if outer is None:
            return self.scope(node)
        scopes = self._local_scopes.get(outer)
        if scopes is None:
            if _has_global(outer):
                scopes = self._local_scopes[outer] = self.wrapper.resolve(ScopeProvider)
            else:
                alone = cst.Module(body=[outer])
                scopes = self._local_scopes[outer] = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(ScopeProvider)
        return scopes.get(node)

    def assignments(self, node: cst.CSTNode, name: str):
        """``scope(node)[name]``, the bindings ``name`` resolves to where ``node`` is, as
        the whole-module ScopeProvider gives them, from :meth:`local_scope` when the
        name is bound inside the function (or class) around ``node``: only a name that
        resolves to the module level needs the whole module analysed. None when
        ``node`` has no scope."""
        scope = self.local_scope(node)
        if scope is None or self._scopes is not None:
            return None if scope is None else scope[name]
        found = scope[name]
        if found and not any(isinstance(a.scope, GlobalScope) for a in found):
            return found
        scope = self.scope(node)
        return None if scope is None else scope[name]

    def plain_values(self, name: cst.Name) -> list[cst.BaseExpression]:
        """The values a local variable or parameter can hold, when every binding of it
        is a plain assignment (``x = v``, ``x: T = v``) or a parameter default; empty
        when any binding is something else (a loop, tuple unpacking, a walrus, a
        an import): then the value cannot be told. A parameter without a default adds
        no value."""
        assignments = self.assignments(name, name.value)
        if assignments is None:
            return []
        values = []
        for assignment in assignments:
            if not isinstance(assignment, Assignment):
                return []
            target = assignment.node
            if isinstance(target, cst.Param):
                if target.default is not None:
                    values.append(target.default)
                continue
            parent = self.parent(target)
            if isinstance(parent, cst.AssignTarget):
                statement = self.parent(parent)
                if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                    values.append(statement.value)
                    continue
            if isinstance(parent, cst.AnnAssign) and parent.target is target and parent.value is not None:
                values.append(parent.value)
                continue
            return []
        return values

    def position(self, node: cst.CSTNode) -> CodeRange:
        """Where ``node`` is in the original file."""
        if self.statement_starts is None:
            where = self._whole_position(node)
        else:
            if self._statement_positions is None:
                self._statement_positions = StatementPositions(self.module, self.statement_starts, self._whole_position)
            where = self._statement_positions.get(node, [node, *self.ancestors(node)])
        return where if self.reduced is None else relined(where, self.reduced.original_line)

    def _whole_position(self, node: cst.CSTNode) -> CodeRange:
        if self._positions is None:
            self._positions = self.wrapper.resolve(PositionProvider)
        return self._positions[node]

    # -- recording (rules call these through Rule helpers) ---------------------------

    def record_replace(self, rule, node, new, message, needs_torch_npu, anchor, requires=(), reason=None) -> None:
        self.edits.append(Edit(rule, node, anchor, message, needs_torch_npu, replacement=new, requires=requires,
                               reason=reason))

    def record_insert(self, rule, statement, before, after, message, needs_torch_npu, anchor, first=False) -> None:
        if not isinstance(statement, cst.BaseStatement):
            statement = self.enclosing_statement(statement)
        self.edits.append(
            Edit(rule, statement, anchor, message, needs_torch_npu, before=before, after=after, first=first)
        )

    def record_import(self, rule, module, obj, asname) -> None:
        self.import_requests.append(ImportRequest(rule, module, obj, asname))

    def record_finding(self, rule, node, message, suggestion) -> None:
        self.findings.append(FindingRecord(rule, node, message, suggestion))



class _GlobalFinder(cst.CSTVisitor):
    found = False

    def visit_Global(self, node: cst.Global) -> bool:
        self.found = True
        return False


def _has_global(node: cst.CSTNode) -> bool:
    finder = _GlobalFinder()
    node.visit(finder)
    return finder.found


def preferred_quote(text: str) -> str:
    """``'`` when more one-line string literals of ``text`` use single quotes than
    double quotes, else ``"``."""
    counts = {"'": 0, '"': 0}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.STRING:
                continue
            body = token.string.lstrip("rRbBuUfF")
            if not body or body[:3] in ("\'\'\'", '"""'):
                continue
            counts[body[0]] += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return "'" if counts["'"] > counts['"'] else '"'
