"""NPU010: code that already handles NPU is left alone."""

from npu_migrate.python.rule import Example, Rule


class AlreadyNpuAware(Rule):
    id = "NPU010"
    impact = "informational"
    name = "already-npu-aware"
    summary = "CUDA code in an if/elif chain (or conditional expression) that already has an NPU branch is left unchanged"
    fixable = False
    rationale = """
Many libraries already branch on NPU (deepspeed, transformers, accelerate, mmengine,
timm, ultralytics): `if is_torch_npu_available(): ... elif torch.cuda.is_available(): ...`.
Rewriting the CUDA branch would turn it into a second NPU branch and break the
library on GPUs. The engine therefore drops every fix and finding inside an
`if`/`elif`/`else` chain, or a conditional expression, whose test mentions NPU
(`npu`, `torch_npu`, `is_npu_available()`, ...), and reports the lines it left
alone under this id instead, so nothing is silently skipped.

This rule has no visitor: the engine applies it to the other rules' edits.
"""
    examples = (
        Example(
            "import torch\n"
            "if is_torch_npu_available():\n"
            "    device = torch.device('npu')\n"
            "elif torch.cuda.is_available():\n"
            "    device = torch.device('cuda')\n"
        ),
    )
