"""NPU924: ``torch.set_float32_matmul_precision("high"/"medium")`` does not turn on HF32."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule


class Float32MatmulPrecision(Rule):
    id = "NPU924"
    impact = "informational"
    name = "float32-matmul-precision"
    summary = "Report `torch.set_float32_matmul_precision('high'/'medium')`: on Ascend HF32 is `torch.npu.matmul.allow_hf32`"
    triggers = ("set_float32_matmul_precision",)
    local_names = ("torch.set_float32_matmul_precision",)
    fixable = False
    rationale = """
`torch.set_float32_matmul_precision("high")` (or `"medium"`) is how CUDA code
turns on TF32 (or bf16-based) fp32 matmuls; modded-nanogpt-style and Lightning
scripts set it at start-up. Ascend's reduced-precision fp32 mode is HF32, and
torch_npu switches it with its own flag, `torch.npu.matmul.allow_hf32`
(default off; `torch.npu.conv.allow_hf32` for convolutions, default on). The
call itself is harmless on NPU, so it is reported, not removed: set
`torch.npu.matmul.allow_hf32 = True` where the speed of TF32 was the point,
or leave fp32 exact. `"highest"` (the default) is not reported. NPU601
rewrites the `allow_tf32` flags themselves.
"""
    examples = (
        Example("import torch\ntorch.set_float32_matmul_precision('high')  # reported\n"),
        Example("import torch\ntorch.set_float32_matmul_precision('highest')\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) != "torch.set_float32_matmul_precision":
            return
        arg = call_arg(node, "precision", 0)
        value = string_value(arg.value) if arg is not None else None
        if value == "highest":
            return
        shown = f'"{value}"' if value is not None else "a computed precision"
        self.report(node, f"`torch.set_float32_matmul_precision({shown})` selects TF32 on CUDA; it does not switch Ascend's HF32",
                    "where the reduced-precision speed is wanted, also set torch.npu.matmul.allow_hf32 = True "
                    "(after import torch_npu); otherwise fp32 matmuls stay exact on NPU")
