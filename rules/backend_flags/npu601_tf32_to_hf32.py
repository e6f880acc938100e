"""NPU601: TF32 switches -> the HF32 switches of torch_npu."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example

from ._common import FlagUseRule, torch_root

TARGETS = {
    "torch.backends.cuda.matmul.allow_tf32": "npu.matmul.allow_hf32",
    "torch.backends.cudnn.allow_tf32": "npu.conv.allow_hf32",
}
REDUCED_PRECISION = (
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
)


class Tf32ToHf32(FlagUseRule):
    id = "NPU601"
    name = "tf32-to-hf32"
    summary = "Rewrite the TF32 switches to `torch.npu.matmul.allow_hf32` / `torch.npu.conv.allow_hf32`"
    triggers = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")
    rationale = """
Ascend's counterpart of TF32 is HF32 (a reduced-precision fp32 mode of the
cube unit). torch_npu exposes it as `torch.npu.matmul.allow_hf32` and
`torch.npu.conv.allow_hf32` (`torch_npu/npu/__init__.py` creates the `matmul` and
`conv` objects; setting the attribute sets the `ALLOW_MATMUL_HF32` /
`ALLOW_CONV_HF32` options). The defaults match torch's TF32 defaults: matmul off,
convolution on. So `torch.backends.cuda.matmul.allow_tf32` becomes
`torch.npu.matmul.allow_hf32` and `torch.backends.cudnn.allow_tf32` becomes
`torch.npu.conv.allow_hf32`, for writes (`= True`) and reads (`if ...:`) alike,
through every import alias (`from torch.backends import cudnn`).

Leaving them as they are is a silent no-op on NPU, and so is the tempting
setting `allow_tf32` on the `torch.npu.matmul` object: it accepts any attribute
and ignores it. Setting `allow_hf32` to a non-bool raises `TypeError`.
`allow_fp16/bf16_reduced_precision_reduction` have no NPU switch and are reported.
"""
    examples = (
        Example(
            "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n",
            (
                "import torch\n"
                "\n"
                "try:\n"
                "    import torch_npu  # noqa: F401\n"
                "except ImportError:  # no torch_npu here (a CPU machine): the CPU path runs as before\n"
                "    pass\n"
                "\n"
                "torch.npu.matmul.allow_hf32 = True\n"
                "torch.npu.conv.allow_hf32 = True\n"
            ),
        ),
        Example("import torch\ntorch.set_float32_matmul_precision('high')\n"),
    )

    def check(self, node: cst.Attribute | cst.Name, qualified: str) -> None:
        if qualified in REDUCED_PRECISION:
            self.report(node, f"`{qualified}` has no NPU switch", "remove it; on NPU the closest control is torch.npu.matmul.allow_hf32")
            return
        if qualified not in TARGETS:
            return
        root = torch_root(self.ctx, node)
        target = f"torch.{TARGETS[qualified]}"
        if root is None:
            self.report(node, f"`{qualified}` does nothing on NPU", f"use `{target}`")
            return
        self.replace(node, cst.parse_expression(f"{root}.{TARGETS[qualified]}"), f"`{qualified}` -> `{target}`")
        if root == "torch" and self.ctx.imports.bindings.get("torch") is None:
            self.add_import("torch")
