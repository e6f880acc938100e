"""Where an inserted import goes, so that isort/ruff (``I001``) and ``ruff --fix``
(``F401``) leave the output alone.

* ``import torch_npu`` is used only for its side effect (it registers the ``npu``
  device, ``torch.npu`` and the ``hccl`` backend), so linters see an unused import
  and ``ruff --fix`` deletes it. It is written ``import torch_npu  # noqa: F401``.
* An import joins the block of the file's top-level imports that holds the
  package it belongs with (``torch`` for ``torch_npu``; the block of the file's
  first ``torch`` import for a third-party package such as ``npu_runtime``), at
  the place isort's default order gives it there: plain ``import x`` statements
  before ``from x import y`` ones, each sorted by module name, case-insensitively
  (``torch``, ``torch.nn``, ``torch_npu``, ``torchvision``). In a file that imports
  no torch, ``npu_runtime`` joins the block of the file's first third-party import
  (neither the standard library nor the project's own). A block is a run of
  import statements without a blank line between them. In a file whose imports
  are not sorted, the result is still next to the imports it belongs with.
* It never goes after a statement that needs it (``from torch.npu import ...``
  needs ``torch_npu`` first).
"""

from __future__ import annotations

import sys

import libcst as cst
from libcst.helpers import get_full_name_for_node

TORCH_NPU = "torch_npu"
#: How ``import torch_npu`` is written: linters must keep this side-effect import.
TORCH_NPU_IMPORT = "import torch_npu  # noqa: F401\n"


def _single_import(statement: cst.CSTNode) -> cst.Import | cst.ImportFrom | None:
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
    ):
        return statement.body[0]
    return None


def imported_modules(statement: cst.CSTNode) -> list[str]:
    """Dotted modules a top-level statement imports (``from a import b`` gives ``a.b``)."""
    names: list[str] = []
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Import):
                names.extend(get_full_name_for_node(a.name) or "" for a in small.names)
            elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                module = get_full_name_for_node(small.module) or ""
                if isinstance(small.names, cst.ImportStar):
                    names.append(module)
                else:
                    names.extend(f"{module}.{get_full_name_for_node(a.name)}" for a in small.names)
    return names


def _is_package(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _starts_block(statement: cst.CSTNode) -> bool:
    """A blank line above the statement separates import blocks (comments do not)."""
    lines = getattr(statement, "leading_lines", ())
    return any(line.comment is None for line in lines)


def _sort_key(node: cst.Import | cst.ImportFrom) -> tuple[int, str]:
    if isinstance(node, cst.Import):
        return 0, (get_full_name_for_node(node.names[0].name) or "").lower()
    module = get_full_name_for_node(node.module) if node.module is not None else ""
    return 1, ("." * len(node.relative) + (module or "")).lower()


def import_position(body, module: str, *, near: str = "torch", from_import: bool = False) -> tuple[int, bool] | None:
    """Where in ``body`` (a module's statements) ``import <module>`` (``from <module>
    import ...`` with ``from_import``) goes: the index, and whether that is the head
    of its block. None when the file has no top-level import of ``near`` to put it
    next to."""
    first = next((i for i, s in enumerate(body) if any(_is_package(n, near) for n in imported_modules(s))), None)
    if first is None:
        return None
    start = first
    while start > 0 and _single_import(body[start - 1]) is not None and not _starts_block(body[start]):
        start -= 1
    end = first + 1
    while end < len(body) and _single_import(body[end]) is not None and not _starts_block(body[end]):
        end += 1
    key = (1 if from_import else 0, module.lower())
    position = start
    for index in range(start, end):
        node = _single_import(body[index])
        if node is not None and _sort_key(node) <= key:
            position = index + 1
    # never after a statement that needs torch_npu imported first
    needs = next(
        (i for i, s in enumerate(body) if any(_is_package(n, "torch.npu") for n in imported_modules(s))), None
    )
    if module == TORCH_NPU and needs is not None and needs < position:
        position = needs
    return position, position == start


def third_party_neighbour(body, is_local) -> str | None:
    """The top-level package of the file's first top-level import that is neither the
    standard library nor the project's own (``is_local(dotted)``): the block that a new
    third-party import (``npu_runtime``) joins in a file that imports no torch (a
    Hydra entry point: ``import hydra`` then ``from mypkg.utils import Trainer``), where
    isort puts it. None when every import is the standard library's or the project's."""
    for statement in body:
        node = _single_import(statement)
        if node is None or (isinstance(node, cst.ImportFrom) and node.relative):
            continue
        for name in imported_modules(statement):
            top = name.split(".")[0]
            if top and top != "__future__" and top not in sys.stdlib_module_names and not is_local(name):
                return top
    return None


def insert_import(module: cst.Module, name: str, code: str, *, near: str = "torch") -> cst.Module | None:
    """``module`` with the import statement ``code`` (of module ``name``; a plain
    import or a from-import) placed in the import block of ``near``; None when the
    file has no top-level import of ``near``."""
    where = import_position(module.body, name, near=near, from_import=code.startswith("from "))
    if where is None:
        return None
    position, at_head = where
    statement = cst.parse_statement(code)
    body = list(module.body)
    if at_head and position < len(body) and body[position].leading_lines:
        # the head of a block: take over the blank line (and comments) above the block
        statement = statement.with_changes(leading_lines=body[position].leading_lines)
        body[position] = body[position].with_changes(leading_lines=())
    body.insert(position, statement)
    return module.with_changes(body=body)


def imports_plainly(module: cst.Module, name: str) -> bool:
    """A top-level ``import <name>`` (without ``as``) is in the module."""
    for statement in module.body:
        node = _single_import(statement)
        if isinstance(node, cst.Import) and any(
            a.asname is None and get_full_name_for_node(a.name) == name for a in node.names
        ):
            return True
    return False


def imports_from(module: cst.Module, name: str) -> bool:
    """A ``from <name> import ...`` is anywhere in the module (libcst's
    AddImportsVisitor then adds the name to it, or finds it already there)."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            nonlocal found
            if not node.relative and node.module is not None and get_full_name_for_node(node.module) == name:
                found = True
            return False

    module.visit(_Find())
    return found


#: How library code imports torch_npu (npu_migrate/pipeline/entry_points.py): the package still
#: imports where torch_npu is not installed.
TORCH_NPU_GUARDED = (
    "try:\n"
    "    import torch_npu  # noqa: F401\n"
    "except ImportError:  # library code: importable where torch_npu is not installed\n"
    "    pass\n"
)


def insert_torch_npu(module: cst.Module, *, guarded: bool = False) -> cst.Module | None:
    """``module`` with ``import torch_npu`` placed next to its torch imports; None
    when it has no top-level torch import (the caller adds it at the top). ``guarded``:
    the try/except ImportError form of library code, placed after the top-level
    imports when there is no torch import to put it next to."""
    if not guarded:
        return insert_import(module, TORCH_NPU, TORCH_NPU_IMPORT)
    placed = insert_import(module, TORCH_NPU, TORCH_NPU_GUARDED)
    if placed is not None:
        return placed
    body = list(module.body)
    position = 0
    while position < len(body) and (_single_import(body[position]) is not None or (
            position == 0 and isinstance(body[0], cst.SimpleStatementLine)
            and isinstance(body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString))):
        position += 1
    if position < len(body) and isinstance(body[position], (cst.FunctionDef, cst.ClassDef)) \
            and not body[position].leading_lines:
        body[position] = body[position].with_changes(leading_lines=(cst.EmptyLine(), cst.EmptyLine()))
    body.insert(position, cst.parse_statement(TORCH_NPU_GUARDED))
    return module.with_changes(body=body)


def keep_torch_npu(module: cst.Module) -> cst.Module:
    """Give a bare top-level ``import torch_npu`` (as libcst's AddImportsVisitor writes
    it) the ``# noqa: F401`` that keeps linters from deleting it."""
    body = list(module.body)
    for index, statement in enumerate(body):
        node = _single_import(statement)
        if (
            isinstance(node, cst.Import)
            and len(node.names) == 1
            and node.names[0].asname is None
            and get_full_name_for_node(node.names[0].name) == TORCH_NPU
            and statement.trailing_whitespace.comment is None
        ):
            body[index] = statement.with_changes(
                trailing_whitespace=cst.TrailingWhitespace(
                    whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# noqa: F401")
                )
            )
            return module.with_changes(body=body)
    return module
