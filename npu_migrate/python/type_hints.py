"""Type hints are not device code.

A rewrite inside an annotation (``-> Union[torch.profiler.profile, ...]``,
``event: torch.cuda.Event | None``) changes nothing a program does on Ascend: the
object is whatever the code builds, and ``torch.cuda.Event`` exists in every torch
build. It can only break the CPU path: without ``from __future__ import
annotations`` an annotation is evaluated when its ``def`` or class body runs, so
``torch_npu.profiler.profile`` or ``torch.npu.Event`` there raises where torch_npu is
absent (the held-out round found 13 torchtune recipes and an axolotl class body that
no longer imported on CPU). So no rule edits or reports anything inside one.
"""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.context import FileContext


def in_annotation(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is an annotation or lies inside one (of a parameter, a return, or
    an annotated assignment)."""
    if isinstance(node, cst.Annotation):
        return True
    return any(isinstance(ancestor, cst.Annotation) for ancestor in ctx.ancestors(node))
