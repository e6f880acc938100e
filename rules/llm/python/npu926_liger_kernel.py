"""NPU926: Liger kernels (Triton); an Ascend backend covers only some of them."""

from __future__ import annotations

import libcst as cst
from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example

ROUTE = (
    "liger-kernel 0.8.5 ships an Ascend backend (liger_kernel/ops/backends/_ascend, default on npu, Triton-Ascend "
    "kernels) for cross-entropy, fused linear cross-entropy, layer/RMS norm, RoPE and SwiGLU only: pin "
    "liger-kernel>=0.8.5 with triton-ascend and keep to those patches, or turn Liger off (use_liger False) and "
    "use torch_npu's fused ops (npu_rms_norm, npu_rotary_mul, npu_swiglu)"
)


USES = {"liger_kernel": ROUTE}


class LigerKernel(CudaOnlyPackage):
    id = "NPU926"
    name = "liger-kernel"
    summary = "Report Liger kernel imports and patches; Ascend coverage is partial (liger-kernel 0.8.5)"
    label = "Liger kernels"
    packages = ("liger_kernel",)
    problem = "Liger's kernels are Triton code written for CUDA; its Ascend backend covers only some ops"
    import_suggestion = ROUTE
    uses = USES
    triggers = ("liger_kernel", "use_liger", "use_liger_kernel", "enable_liger_kernel")
    rationale = f"""
Liger (linkedin/Liger-Kernel) patches transformers models with Triton kernels
(`apply_liger_kernel_to_llama()`, `AutoLigerKernelForCausalLM`,
`TrainingArguments(use_liger_kernel=True)`). InternVL's train scripts import it
behind `--use_liger True` (16 of its launchers pass it), LLaMA-Factory behind
`enable_liger_kernel`. The published liger-kernel 0.8.5 wheel has
`ops/backends/_ascend/` (registered as the default implementation for `npu`)
with cross_entropy, fused_linear_cross_entropy, layer_norm, rms_norm, rope and
swiglu; the other ops (GEGLU, JSD, KL-div, fused MoE, Qwen2-VL M-RoPE, ...) have
no Ascend implementation. Route: {ROUTE}. The launcher and config switches are
NPU937 and NPU942.
"""
    examples = (
        Example("from liger_kernel.transformers import apply_liger_kernel_to_llama  # reported\n"),
        Example("from transformers import AutoModelForCausalLM\n"),
    )

    def visit_Arg(self, node: cst.Arg) -> None:
        """``TrainingArguments(use_liger_kernel=True)``: transformers applies Liger itself."""
        if (node.keyword is not None and node.keyword.value in ("use_liger_kernel", "use_liger", "enable_liger_kernel")
                and isinstance(node.value, cst.Name) and node.value.value == "True"):
            self.report(node, f"`{node.keyword.value}=True` patches the model with Liger's Triton kernels", ROUTE)
