"""NPU906: bitsandbytes (8-bit optimizers, 8/4-bit quantized layers)."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

_OPTIM = (
    "use a full-precision optimizer: torch_npu.optim.NpuFusedAdamW(params, lr=..., betas=..., weight_decay=...) or "
    "torch.optim.AdamW(params, ..., fused=True); budget for 8 bytes of optimizer state per parameter instead of 2"
)
_LAYERS = (
    "train in bf16 with torch.nn.Linear / torch.nn.Embedding; quantized NF4 layers need bitsandbytes' experimental "
    "Ascend backend (NF4 only), so check the exact version before relying on it"
)


class Bitsandbytes(CudaOnlyPackage):
    id = "NPU906"
    impact = "blocking"
    name = "bitsandbytes"
    summary = "Report bitsandbytes imports and its 8-bit optimizers / quantized layers"
    label = "bitsandbytes"
    packages = ("bitsandbytes",)
    problem = "bitsandbytes' kernels are CUDA-first; its regular wheels have no Ascend backend"
    import_suggestion = (
        "replace 8-bit optimizers with torch_npu.optim.NpuFusedAdamW or torch.optim.AdamW(fused=True), and quantized "
        "layers with bf16 torch.nn layers"
    )
    uses = {
        "bitsandbytes.optim": _OPTIM,
        "bitsandbytes.nn": _LAYERS,
        "bitsandbytes.functional": "no NPU equivalent for the quantize/dequantize primitives; keep tensors in bf16",
    }
    triggers = ("bitsandbytes",)
    rationale = """
bitsandbytes provides 8-bit optimizers and LLM.int8()/NF4 quantized layers built
on CUDA kernels. An Ascend backend exists only as experimental work covering
NF4 quantization, so the general advice is: full-precision optimizer state
(`torch_npu.optim.NpuFusedAdamW`, or `torch.optim.AdamW(fused=True)`, which torch_npu
2.13 implements) and bf16 layers. The memory budget changes accordingly, which
is why nothing is rewritten.
"""
    examples = (
        Example("import bitsandbytes as bnb  # reported\n"),
        Example("import torch\nopt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)\n"),
    )
