"""Shared by NPU101 and NPU102: where a ``torch.cuda`` name is used, and how it was imported."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.names import dotted_name

CUDA = "torch.cuda"
#: torch.cuda.amp is migrated by the AMP family (NPU3xx), not by a plain rename.
OWNED_ELSEWHERE = ("torch.cuda.amp",)


def is_cuda_name(qualified: str | None) -> bool:
    if qualified is None or not (qualified == CUDA or qualified.startswith(CUDA + ".")):
        return False
    return not any(qualified == o or qualified.startswith(o + ".") for o in OWNED_ELSEWHERE)


def root_binding(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """What the first name of ``node``'s dotted chain was imported as (``torch``,
    ``torch.cuda``, ``torch.cuda.synchronize``...)."""
    dotted = dotted_name(node)
    if dotted is None:
        return None
    return ctx.imports.bindings.get(dotted.split(".", 1)[0])


def _plain_chain(node: cst.CSTNode) -> bool:
    """``torch.cuda.X``, not ``torch.cuda.X(n).zero_``: libcst names an attribute of a
    call's result as if the call were not there (``torch.cuda.X.zero_``)."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def cuda_uses(ctx: FileContext, node: cst.Attribute | cst.Name) -> str | None:
    """The qualified ``torch.cuda...`` name of an outermost use outside imports; the
    attribute of a call's result (``torch.cuda.LongTensor(n).zero_``) is no use of
    ``torch.cuda`` itself (the call is, and that is what the rules act on)."""
    if not ctx.is_outermost(node) or not _plain_chain(node):
        return None
    qualified = ctx.qualified_name(node)
    if not is_cuda_name(qualified) or ctx.in_import(node):
        return None
    return qualified
