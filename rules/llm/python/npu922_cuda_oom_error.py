"""NPU922: ``torch.cuda.OutOfMemoryError`` handlers catch NPU out-of-memory too; reported, left as they are."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example, Rule

NAMES = ("torch.cuda.OutOfMemoryError", "torch.cuda.memory.OutOfMemoryError")


class CudaOomError(Rule):
    id = "NPU922"
    name = "cuda-oom-error"
    impact = "informational"
    summary = "Report `torch.cuda.OutOfMemoryError` handlers: they catch NPU out-of-memory too (torch >= 2.5)"
    triggers = ("OutOfMemoryError",)
    fixable = False
    rationale = """
Since torch 2.5 the out-of-memory exception is device-generic:
`torch.OutOfMemoryError` (pytorch PR #121702, "Support Accelerator OOM Error"),
and `torch.cuda.OutOfMemoryError` is the same class kept as an alias
(`torch.cuda.OutOfMemoryError is torch.OutOfMemoryError` in torch 2.13), which
torch_npu's allocator raises for NPU out-of-memory. So an `except
torch.cuda.OutOfMemoryError:` handler (FastChat's model worker answers with an
error instead of dying) already catches it on Ascend, and is left as it is:
renaming it to `torch.OutOfMemoryError` changes nothing on torch >= 2.5 and is
an AttributeError on older torch (FastChat pins none), where torch_npu raised a
plain `RuntimeError` that neither name catches. `torch.npu` has no
`OutOfMemoryError`: renaming `torch.cuda` to `torch.npu` would be wrong, and
deleting the handler (NPU102's generic advice) would lose the recovery, so NPU102
defers to this rule. Each handler is reported once, for information.
"""
    examples = (
        Example("import torch\ntry:\n    step()\nexcept torch.cuda.OutOfMemoryError:  # reported\n    skip()\n"),
        Example("import torch\ntry:\n    step()\nexcept torch.OutOfMemoryError:\n    skip()\n"),
    )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def _use(self, node: cst.Attribute | cst.Name) -> None:
        if not self.ctx.is_outermost(node) or self.ctx.in_import(node):
            return
        qualified = self.qualified_name(node)
        if qualified not in NAMES:
            return
        self.report(node, f"`{qualified}` is `torch.OutOfMemoryError` since torch 2.5, which NPU out-of-memory "
                          "raises too: this handler catches it on Ascend; left as it is",
                    "nothing to do on torch_npu >= 2.5 (older torch_npu raises a plain RuntimeError, which no "
                    "OutOfMemoryError handler catches)")
