"""Shared by the NPU9xx rules: finding imports and uses of CUDA-only packages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

import libcst as cst
from libcst.helpers import get_full_name_for_node

from npu_migrate.python.context import FileContext
from npu_migrate.python.names import dotted_name
from npu_migrate.python.rule import Rule


def within(qualified: str, prefixes: Iterable[str]) -> bool:
    """``qualified`` is one of ``prefixes`` or a dotted child of one."""
    return any(qualified == p or qualified.startswith(p + ".") for p in prefixes)


def best_match(qualified: str, table: Mapping[str, str]) -> str | None:
    """The value of the longest key of ``table`` that ``qualified`` is or is inside of."""
    matches = [key for key in table if qualified == key or qualified.startswith(key + ".")]
    return table[max(matches, key=len)] if matches else None


_CHECKS = frozenset({"isinstance", "issubclass", "hasattr", "callable", "getattr", "id", "type"})


def is_use_site(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is called, decorates, is subclassed, or is passed on / stored / returned;
    not merely tested (``if flash_attn_func is not None``, ``isinstance(m, DataParallel)``)."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Call):
        return parent.func is node
    if isinstance(parent, cst.Decorator):
        return True
    if isinstance(parent, cst.Arg):
        owner = ctx.parent(parent)
        if isinstance(owner, cst.ClassDef):
            return True
        if isinstance(owner, cst.Call):
            name = owner.func.value if isinstance(owner.func, cst.Name) else None
            return name not in _CHECKS
        return False
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return)):
        return parent.value is node
    return False


def guard(ctx: FileContext, node: cst.CSTNode, *, imports: bool) -> str | None:
    """Why ``node`` may not run on every machine: the innermost try/if around it
    (and, for imports, a ``with`` block or a function body), or None."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.Try, cst.TryStar)):
            return "inside try/except"
        if isinstance(ancestor, (cst.If, cst.IfExp)):
            return "under an `if`"
        if imports and isinstance(ancestor, cst.With):
            return "inside a `with` block"
        if imports and isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return "inside a function, so it only runs when the function is called"
    return None


def imported_names(node: cst.Import | cst.ImportFrom) -> list[str]:
    """The qualified names an import statement binds (``from a import b`` gives ``a.b``;
    ``from a import *`` gives ``a``). Relative imports give nothing."""
    if isinstance(node, cst.Import):
        return [get_full_name_for_node(alias.name) or "" for alias in node.names]
    if node.relative or node.module is None:
        return []
    module = get_full_name_for_node(node.module) or ""
    if isinstance(node.names, cst.ImportStar):
        return [module]
    return [f"{module}.{get_full_name_for_node(alias.name)}" for alias in node.names]


class CudaOnlyPackage(Rule):
    """Base class: one finding per import statement of ``packages`` (minus ``exempt``),
    plus one per use of a name listed in ``uses``, with its own suggestion.

    A use reached through a parent package that the file imports without naming
    the CUDA-only part (``import deepspeed`` ... ``deepspeed.ops.sparse_attention.X``)
    is reported too, since no import statement was.
    """

    fixable = False
    #: Human name of the package, e.g. "flash-attn".
    label: ClassVar[str]
    #: Qualified module prefixes that make up the package.
    packages: ClassVar[tuple[str, ...]]
    #: Sub-modules that do work on Ascend (left alone).
    exempt: ClassVar[tuple[str, ...]] = ()
    #: Why an unguarded import is a problem (completes "`flash_attn`: ...").
    problem: ClassVar[str]
    #: What to do about the import.
    import_suggestion: ClassVar[str]
    #: Qualified name (or prefix) of an API -> concrete suggestion for its uses.
    uses: ClassVar[Mapping[str, str]] = {}

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._imported: set[str] = set()
        self._through_parent: list[tuple[cst.CSTNode, str]] = []

    def is_target(self, qualified: str) -> bool:
        return within(qualified, self.packages) and not within(qualified, self.exempt)

    def suggestion_for_import(self, hits: list[str]) -> str:
        """What to do about an import of ``hits`` (qualified names); by default the package's."""
        return self.import_suggestion

    # -- imports ---------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        self._import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import(node)

    def _import(self, node: cst.Import | cst.ImportFrom) -> None:
        hits = [name for name in imported_names(node) if self.is_target(name)]
        if not hits:
            return
        self._imported.update(hits)
        shown = ", ".join(f"`{h}`" for h in hits)
        where = guard(self.ctx, node, imports=True)
        if where is not None:
            message = (
                f"guarded import of {self.label} ({shown}, {where}): make sure the fallback path "
                "is the one taken on NPU"
            )
        else:
            message = f"{shown}: {self.problem}"
        self.report(node, message, self.suggestion_for_import(hits))

    # -- uses ------------------------------------------------------------------------

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def _use(self, node: cst.Name | cst.Attribute) -> None:
        if not self.ctx.is_outermost(node):
            return
        qualified = self.qualified_name(node)
        if qualified is None or not self.is_target(qualified) or self.ctx.in_import(node):
            return
        suggestion = best_match(qualified, self.uses)
        if suggestion is not None:
            if not is_use_site(self.ctx, node):
                return
            message = f"`{qualified}` ({self.label}) does not run on Ascend"
            where = guard(self.ctx, node, imports=False)
            if where is not None:
                message += f" ({where}: if that is the CUDA switch, make sure NPU takes the other branch)"
            self.report(node, message, suggestion)
            return
        dotted = dotted_name(node) or ""
        binding = self.ctx.imports.bindings.get(dotted.split(".", 1)[0], "")
        if not self.is_target(binding):  # reached through a parent package
            self._through_parent.append((node, qualified))

    def leave_file(self) -> None:
        seen: set[cst.CSTNode] = set()
        for node, qualified in self._through_parent:
            statement = self.ctx.enclosing_statement(node)
            if within(qualified, self._imported) or statement in seen:
                continue
            seen.add(statement)
            self.report(node, f"`{qualified}`: {self.problem}", self.import_suggestion)
