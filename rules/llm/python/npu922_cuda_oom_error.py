"""NPU922: ``torch.cuda.OutOfMemoryError`` -> ``torch.OutOfMemoryError``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example, Rule

NAMES = ("torch.cuda.OutOfMemoryError", "torch.cuda.memory.OutOfMemoryError")


class CudaOomError(Rule):
    id = "NPU922"
    name = "cuda-oom-error"
    summary = "Catch `torch.OutOfMemoryError` instead of `torch.cuda.OutOfMemoryError`"
    triggers = ("OutOfMemoryError",)
    fixable = True
    rationale = """
Since torch 2.5 the out-of-memory exception is device-generic:
`torch.OutOfMemoryError` (pytorch PR #121702, "Support Accelerator OOM Error";
accelerate PR #3475 switched to it), and `torch.cuda.OutOfMemoryError` is the
same class kept as an alias (`torch.cuda.OutOfMemoryError is
torch.OutOfMemoryError` in torch 2.13). torch_npu's `torch.npu` namespace has no
`OutOfMemoryError`, so renaming `torch.cuda` to `torch.npu` is wrong, and
deleting the handler (NPU102's generic advice) would lose the OOM recovery
(FastChat's model worker catches it to answer with an error instead of dying).
`torch.cuda.OutOfMemoryError` reached through `torch` (any alias) becomes
`torch.OutOfMemoryError`; other spellings (`from torch.cuda import
OutOfMemoryError`) are reported. Requires torch >= 2.5, which every torch_npu
release for torch 2.5 and later pairs with.
"""
    examples = (
        Example(
            "import torch\ntry:\n    step()\nexcept torch.cuda.OutOfMemoryError:\n    skip()\n",
            "import torch\ntry:\n    step()\nexcept torch.OutOfMemoryError:\n    skip()\n",
        ),
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
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(node, cst.Attribute) and isinstance(root, cst.Name) and self.ctx.imports.bindings.get(root.value) == "torch":
            new = cst.Attribute(value=cst.Name(root.value), attr=cst.Name("OutOfMemoryError"))
            self.replace(node, new, f"`{qualified}` -> `torch.OutOfMemoryError` (device-generic since torch 2.5)",
                         needs_torch_npu=False)
        else:
            self.report(node, f"`{qualified}` is CUDA's spelling of the out-of-memory error",
                        "catch torch.OutOfMemoryError (device-generic since torch 2.5; NPU out-of-memory raises it too)")
