"""Which Python code builds CUDA sources with torch's JIT extension loader, read from
CPython's ``ast`` alone (no libcst, no torch): what the project facts need to know which
modules cannot be imported on Ascend (:mod:`npu_migrate.pipeline.facts`) and what the
Python front end's CUDA-only analysis uses (:mod:`npu_migrate.python.cuda_only`)."""

from __future__ import annotations

import ast

#: torch's JIT extension loaders
CPP_LOAD = ("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline")


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of ``ast`` Attribute/Name nodes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def jit_build_at_import(tree: ast.Module | None) -> tuple[str, int] | None:
    """``(name, line)`` of the first module-level statement of ``tree`` (not inside ``try``/
    ``if``/a function) that JIT-builds CUDA sources with ``torch.utils.cpp_extension.load``
    or ``load_inline`` (RWKV's ``timex_cuda = load(name="timex", sources=[..."timex_cuda.cu"])``):
    importing the module runs nvcc, which Ascend does not have, so it cannot be imported
    there (held-out round 19). ``name`` is what the build is assigned to."""
    if tree is None:
        return None
    loads: set[str] = set()
    return _build_in(tree.body, loads)


def _build_in(statements: list[ast.stmt], loads: set[str]) -> tuple[str, int] | None:
    """The first CUDA build of :func:`jit_build_at_import` among ``statements``, which run in
    order: an ``if`` counts when both its sides build (RWKV-v7's ``if 'h100' in ...: load(...)
    else: load(...)``)."""
    for statement in statements:
        if isinstance(statement, ast.If) and statement.orelse:
            first = _build_in(statement.body, set(loads))
            if first is not None and _build_in(statement.orelse, set(loads)) is not None:
                return first
            continue
        if isinstance(statement, ast.ImportFrom) and statement.module in ("torch.utils.cpp_extension",):
            loads.update(alias.asname or alias.name for alias in statement.names
                         if alias.name in ("load", "load_inline"))
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == "torch.utils.cpp_extension" and alias.asname:
                    loads.update({f"{alias.asname}.load", f"{alias.asname}.load_inline"})
        value = statement.value if isinstance(statement, (ast.Assign, ast.Expr)) else None
        if not isinstance(value, ast.Call):
            continue
        called = dotted_name(value.func) or ""
        if (called in loads or called in CPP_LOAD or called.endswith(("cpp_extension.load", "cpp_extension.load_inline"))) \
                and builds_cuda(value, {}):
            target = statement.targets[0] if isinstance(statement, ast.Assign) else None
            return (target.id if isinstance(target, ast.Name) else "its CUDA extension"), statement.lineno
    return None


def cuda_sources(call: ast.Call) -> bool:
    def names_cu(node: ast.AST) -> bool:
        if isinstance(node, (ast.List, ast.Tuple)):
            return any(names_cu(e) for e in node.elts)
        if isinstance(node, ast.JoinedStr):  # f"cuda/wkv7s.cu" (RWKV's demos)
            node = node.values[-1] if node.values else node
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith((".cu", ".cuh"))

    for keyword in call.keywords:
        if keyword.arg in ("sources",) and names_cu(keyword.value):
            return True
        if keyword.arg == "cuda_sources" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None):
            return True
        if keyword.arg == "with_cuda" and isinstance(keyword.value, ast.Constant) and keyword.value.value is True:
            return True
    return len(call.args) > 1 and names_cu(call.args[1])


def builds_cuda(call: ast.Call, lists: dict[str, ast.AST]) -> bool:
    """``call`` compiles CUDA: nvcc flags (``extra_cuda_cflags``), ``cuda_sources``, or
    ``sources`` naming ``.cu`` files, literally or through a name assigned a list of them in
    the same function (``sources = ['bias_act.cpp', 'bias_act.cu']``)."""
    if cuda_sources(call):
        return True
    for keyword in call.keywords:
        if keyword.arg == "extra_cuda_cflags":
            return True
        if keyword.arg == "sources" and isinstance(keyword.value, ast.Name):
            listed = lists.get(keyword.value.id)
            if listed is not None and any(isinstance(c, ast.Constant) and isinstance(c.value, str)
                                          and c.value.endswith((".cu", ".cuh")) for c in ast.walk(listed)):
                return True
    return False
