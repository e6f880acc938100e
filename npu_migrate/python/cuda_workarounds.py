"""A branch taken only on CUDA to work around a CUDA kernel's bug stays CUDA's.

Vendored Hugging Face modeling files make the sdpa inputs contiguous on CUDA only
(``if query_states.device.type == "cuda" and causal_mask is not None:`` followed by
``query_states = query_states.contiguous()`` and the like: torch 2.1.2's memory-efficient
kernel mishandled strided inputs with a custom mask). The NPU's attention does not share
that bug, and transformers itself keeps the test CUDA's, so rewriting the device there
only adds copies on Ascend (Bunny's four language models, held-out round 18). The device
test of an ``if`` whose body does nothing but ``x = x.contiguous()`` is left as it is,
with no finding: either way the code is right on Ascend.
"""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.records import Edit

_TEST_RULE = "NPU104"


def contiguous_only_branches(ctx: FileContext, edits: list[Edit]) -> list[Edit]:
    """``edits`` without the device tests of such branches."""
    return [e for e in edits if e.rule != _TEST_RULE or not _tests_a_contiguous_branch(ctx, e.anchor)]


def _tests_a_contiguous_branch(ctx: FileContext, node: cst.CSTNode) -> bool:
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.If):
            return child is ancestor.test and _only_contiguous(ancestor.body)
        if isinstance(ancestor, (cst.BaseSuite, cst.BaseStatement)):
            return False
        child = ancestor
    return False


def _only_contiguous(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    small = []
    for statement in statements:
        if not isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return False
        small += statement.body
    return bool(small) and all(_contiguous_assign(s) for s in small)


def _contiguous_assign(statement: cst.BaseSmallStatement) -> bool:
    """``x = x.contiguous()``."""
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
        return False
    target, value = statement.targets[0].target, statement.value
    return (isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "contiguous" and isinstance(target, cst.Name)
            and isinstance(value.func.value, cst.Name) and value.func.value.value == target.value)
