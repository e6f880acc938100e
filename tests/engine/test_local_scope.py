"""FileContext.local_scope (scope analysis of one function or class) agrees with the
whole-module ScopeProvider on every name bound in the file: same assignments, same
references (what the device-string data flow follows)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from npu_migrate.python import walk
from npu_migrate.python.context import FileContext

SOURCE = '''
import torch
device = "cuda"

def top(x, dev="cuda:0"):
    d = dev
    y = x.to(d)

    def inner():
        nonlocal d
        d = "cuda:1"
        return [d for _ in range(2)]

    class Local:
        kind = "cuda"
        other = kind

        def method(self, z=kind):
            kind = z
            return kind

    return inner(), y, Local, device, d


class Model:
    dev = "cuda"
    copy = dev
    table = {k: dev for k in range(3)}

    def forward(self, t, dev="cuda"):
        target = dev
        t = t.to(target)
        f = lambda device=target: device
        return f(), t


def uses_global():
    global device
    device = "cuda:2"
    local = device
    return local


for i in range(2):
    device = i
'''


def _context() -> FileContext:
    wrapper = MetadataWrapper(cst.parse_module(SOURCE), unsafe_skip_copy=True)
    ctx = FileContext(path="m.py", text=SOURCE, wrapper=wrapper, imports=None, resolver=None)
    walk.visit_batched(wrapper.module, [], ctx.before_visit, ctx.after_leave)
    return ctx


def _targets(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name):
                found.append(node.target)

        def visit_Param(self, node: cst.Param) -> None:
            found.append(node)

    module.visit(Collect())
    return found


def _summary(scope, name: str, target: cst.CSTNode) -> tuple:
    assignments = [a for a in scope.assignments[name] if getattr(a, "node", None) is target]
    return (type(scope).__name__, len(assignments),
            sorted(id(access.node) for a in assignments for access in a.references))


def test_local_scope_matches_the_whole_module() -> None:
    local_ctx, whole_ctx = _context(), _context()
    # the same module objects in both contexts, so node identities compare
    whole_ctx.wrapper = local_ctx.wrapper
    whole_ctx._parents = local_ctx._parents
    targets = _targets(local_ctx.module)
    assert len(targets) > 15
    nested = [t for t in targets if any(isinstance(a, (cst.FunctionDef, cst.ClassDef))
                                        for a in local_ctx.ancestors(t))]
    assert len(nested) > 12
    # names bound in functions and classes first: answered without the whole module
    for target in [*nested, *(t for t in targets if t not in nested)]:
        node = target.name if isinstance(target, cst.Param) else target
        local = local_ctx.local_scope(target) or local_ctx.local_scope(node)
        whole = whole_ctx.scope(target) or whole_ctx.scope(node)
        if target in nested:
            assert local_ctx._scopes is None, "local_scope resolved the whole module for a nested name"
        assert _summary(local, node.value, target) == _summary(whole, node.value, target), node.value


def _names(module: cst.Module) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    module.visit(Collect())
    return found


def _bindings(found) -> list[tuple]:
    return sorted((type(a).__name__, id(getattr(a, "node", None))) for a in found)


def test_assignments_match_the_whole_module_for_every_name() -> None:
    """``assignments(node, name)`` (what NPU201 and the sampler rules follow) gives the
    bindings the whole-module ScopeProvider gives, for every name read or written
    anywhere; names bound inside a function are answered without the whole module."""
    local_ctx, whole_ctx = _context(), _context()
    whole_ctx.wrapper = local_ctx.wrapper
    whole_ctx._parents = local_ctx._parents
    names = _names(local_ctx.module)
    local_only = ("x", "inner", "z", "target", "t", "f")
    for name in sorted(names, key=lambda n: n.value not in local_only):
        if name.value in local_only and any(isinstance(a, cst.FunctionDef) for a in local_ctx.ancestors(name)):
            local = local_ctx.assignments(name, name.value)
            assert local_ctx._scopes is None, name.value
        else:
            local = local_ctx.assignments(name, name.value)
        whole_scope = whole_ctx.scope(name)
        whole = None if whole_scope is None else whole_scope[name.value]
        assert (local is None) == (whole is None), name.value
        if local is not None:
            assert _bindings(local) == _bindings(whole), name.value
