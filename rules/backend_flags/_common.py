"""Shared by the backend-flag rules (NPU6xx)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.rule import Rule


def flag_use(ctx: FileContext, node: cst.Attribute | cst.Name) -> str | None:
    """Qualified name of an outermost Name/Attribute chain outside import statements."""
    return ctx.use_name(node)


def torch_root(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """The local name under which ``torch`` itself is reachable for a rewrite of ``node``:
    the chain's own root when it is bound to ``torch`` (``import torch as th``), else
    ``torch`` when that name is free (the caller then adds ``import torch``)."""
    root = node
    while isinstance(root, cst.Attribute):
        root = root.value
    if isinstance(root, cst.Name) and ctx.imports.bindings.get(root.value) == "torch":
        return root.value
    if ctx.imports.bindings.get("torch", "torch") == "torch":
        return "torch"
    return None


class FlagUseRule(Rule):
    """Base of the NPU6xx rules: ``check`` sees every outermost dotted use outside imports
    (``torch.backends.cudnn.benchmark``, ``cudnn.benchmark`` via an alias) with its
    qualified name."""

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def _use(self, node: cst.Attribute | cst.Name) -> None:
        qualified = flag_use(self.ctx, node)
        if qualified is not None:
            self.check(node, qualified)

    def check(self, node: cst.Attribute | cst.Name, qualified: str) -> None:
        raise NotImplementedError
