"""Functions that cannot run on Ascend because of what they import.

verl's PPO worker builds its actor in ``init_model``::

    def init_model(self):
        from verl.workers.actor import DataParallelPPOActor   # imports flash-attn
        ...
        self.actor = DataParallelPPOActor(...)

    def update_actor(self, data):
        data = data.to('cuda')
        ...
        metrics = self.actor.update_policy(data=data)

``verl.workers.actor`` cannot be imported on Ascend (its ``dp_actor`` imports
flash-attn at module level), so ``init_model`` stops at its first line there, and
``self.actor`` is never set: ``update_actor`` cannot run either. Their device code
serves nothing on Ascend, and rewritten it sent the batch to the NPU for an actor
that stays CUDA's (held-out round 20: wrong hunks in TinyZero's workers). Porting
the import (the project's module) is the first step; the next run migrates what
those functions hold.

A function cannot run on Ascend when, on every call (in its own statements and
``with`` blocks, not under an ``if``, ``try``, loop or short-circuit):

* it imports a module of the project that cannot be imported there
  (:meth:`ProjectFacts.module_cannot_import`);
* it reads ``self.X`` where every method of its class that assigns ``self.X``
  cannot run (and neither the class body, a method named ``X`` nor a base class of the
  same file binds ``X``): the attribute is never set. A base class of another module is
  not read: where it sets ``X`` itself, the method is reported as unable to run though it
  may (a finding that overstates, never an edit);
* it calls ``self.m(...)`` where the method ``m`` cannot run;
* it is the ``__init__`` of a class whose every other method (two at least) cannot run:
  the object it sets up can do nothing there.

And a private function (``_name``, not a dunder) that is named only inside
functions that cannot run, never elsewhere in the file, cannot run either (nothing
else calls it: ``_build_model_optimizer``, called only by ``init_model``). Names
that other files may call (public ones) are not followed.
"""

from __future__ import annotations

import ast
import collections
import re

from npu_migrate.python.cuda_only import FileIndex, all_nodes, call_on_every_run

#: a function-level import: the only way a function of an importable module fails to import
_INDENTED_IMPORT = re.compile(r"^[ \t]+(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]", re.MULTILINE)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def failing_functions(index: FileIndex) -> dict[int, tuple[ast.AST, str]]:
    """``id(function) -> (function, why it cannot run on Ascend)`` for the file of ``index``
    (computed once per tree)."""
    tree = index.tree
    found = getattr(tree, "_npu_migrate_failing", None)
    if found is None:
        found = _failing(index) if _INDENTED_IMPORT.search(index.ctx.text) else {}
        tree._npu_migrate_failing = found  # ast nodes take attributes; dies with the tree
    return found


def _failing(index: FileIndex) -> dict[int, tuple[ast.AST, str]]:
    facts, path = index.ctx.facts, index.ctx.path
    nodes = all_nodes(index.tree)
    functions = [node for node in nodes if isinstance(node, _FUNCTIONS)]

    def blocked_import(node: ast.AST) -> str | None:
        if isinstance(node, ast.Import):
            names = [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [(module, node.level)]
            # `from pkg import module`: the module is imported too
            names += [(f"{module}.{alias.name}" if module else alias.name, node.level) for alias in node.names]
        else:
            return None
        for dotted, level in names:
            if facts.module_cannot_import(path, dotted, level) is not None:
                return "." * level + dotted
        return None

    failing: dict[int, tuple[ast.AST, str]] = {}
    for function in functions:
        module = call_on_every_run(function.body, blocked_import, kinds=(ast.Import, ast.ImportFrom))
        if module is not None:
            failing[id(function)] = (function, f"it imports `{module}` on every call, and that module of the "
                                               "project cannot be imported on Ascend")
    if not failing:
        return failing
    classes = [node for node in nodes if isinstance(node, ast.ClassDef)]
    changed = True
    while changed:
        changed = _through_attributes(classes, failing) | _private_callees(nodes, functions, failing)
    return failing


def _self_targets(method: ast.AST) -> set[str]:
    """The attributes ``method`` assigns on ``self`` (``self.x = ...``, ``self.a, self.b = ...``)."""
    found: set[str] = set()
    for node in ast.walk(method):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self":
                    found.add(part.attr)
    return found


def _through_attributes(classes: list[ast.ClassDef], failing: dict[int, tuple[ast.AST, str]]) -> bool:
    changed = False
    by_name = {cls.name: cls for cls in classes}
    for cls in classes:
        methods = [m for m in cls.body if isinstance(m, _FUNCTIONS)]
        bound_in_class = {t.id for s in cls.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                          for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)}
        # a method of that name (`self.actor` is then the bound method), and what a base class
        # of the file sets on `self`, are there without the failing method
        bound_in_class |= {m.name for m in methods}
        for base in cls.bases:
            parent = by_name.get(base.id) if isinstance(base, ast.Name) else None
            if parent is not None and parent is not cls:
                bound_in_class |= {a for m in parent.body if isinstance(m, _FUNCTIONS) for a in _self_targets(m)}
                bound_in_class |= {m.name for m in parent.body if isinstance(m, _FUNCTIONS)}
        setters: dict[str, list[ast.AST]] = collections.defaultdict(list)
        for method in methods:
            for attribute in _self_targets(method):
                setters[attribute].append(method)
        never_set = {attribute: found[0] for attribute, found in setters.items()
                     if attribute not in bound_in_class and all(id(m) in failing for m in found)}
        failing_names = {m.name: m for m in methods if id(m) in failing}
        if not never_set and not failing_names:
            continue

        def pick(node: ast.AST) -> str | None:
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                    and node.func.attr in failing_names):
                return f"it calls `self.{node.func.attr}()`, which cannot run on Ascend"
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                    and node.value.id == "self" and node.attr in never_set):
                setter = never_set[node.attr].name
                return f"it reads `self.{node.attr}`, which only `{setter}` sets, and `{setter}` cannot run on Ascend"
            return None

        for method in methods:
            if id(method) in failing:
                continue
            why = call_on_every_run(method.body, pick, kinds=(ast.Call, ast.Attribute))
            if why is not None:
                failing[id(method)] = (method, why)
                changed = True
        # an object that can do nothing: every method but `__init__` cannot run, so what
        # `__init__` sets up (a process group, a device mesh) serves nothing on Ascend
        # (verl's ActorRolloutRefWorker; its `__init__` is the only method left)
        others = [m for m in methods if m.name != "__init__"]
        init = next((m for m in methods if m.name == "__init__"), None)
        if (init is not None and id(init) not in failing and len(others) >= 2
                and all(id(m) in failing for m in others)):
            failing[id(init)] = (init, f"every other method of `{cls.name}` cannot run on Ascend, so the object it "
                                       "sets up can do nothing there")
            changed = True
    return changed


def _private_callees(nodes: list[ast.AST], functions: list[ast.AST], failing: dict[int, tuple[ast.AST, str]]) -> bool:
    spans = [(f.lineno, f.end_lineno or f.lineno) for f, _ in failing.values()]

    def inside_failing(node: ast.AST) -> bool:
        number = getattr(node, "lineno", None)
        return number is not None and any(first <= number <= last for first, last in spans)

    candidates = {f.name: f for f in functions
                  if id(f) not in failing and f.name.startswith("_") and not f.name.startswith("__")}
    if not candidates:
        return False
    references: dict[str, list[ast.AST]] = collections.defaultdict(list)
    for node in nodes:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in candidates:
            references[name].append(node)
    changed = False
    for name, function in candidates.items():
        named = references.get(name, [])
        if named and all(inside_failing(node) for node in named) and sum(f.name == name for f in functions) == 1:
            caller = next(f for f, _ in failing.values()
                          if f.lineno <= named[0].lineno <= (f.end_lineno or f.lineno))
            failing[id(function)] = (function, f"only `{caller.name}` calls it, and `{caller.name}` cannot run on "
                                               "Ascend")
            changed = True
    return changed
