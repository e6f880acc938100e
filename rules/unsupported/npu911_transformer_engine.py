"""NPU911: NVIDIA Transformer Engine (FP8 layers)."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

USES = {
    "transformer_engine.pytorch.Linear": "torch.nn.Linear(in_features, out_features, bias=...)",
    "transformer_engine.pytorch.LayerNorm": "torch.nn.LayerNorm(hidden_size, eps=eps)",
    "transformer_engine.pytorch.RMSNorm": "torch.nn.RMSNorm(hidden_size, eps=eps), or torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0]",
    "transformer_engine.pytorch.LayerNormLinear": "torch.nn.Sequential(torch.nn.LayerNorm(...), torch.nn.Linear(...))",
    "transformer_engine.pytorch.LayerNormMLP": "a LayerNorm followed by your MLP built from torch.nn.Linear layers",
    "transformer_engine.pytorch.DotProductAttention": (
        "torch_npu.npu_fusion_attention(q, k, v, head_num=..., input_layout=\"BSND\" or \"SBH\", "
        "scale=head_dim ** -0.5)[0], or torch.nn.functional.scaled_dot_product_attention"
    ),
    "transformer_engine.pytorch.fp8_autocast": (
        "no FP8 training path here: remove the context manager and train under "
        "torch.autocast(\"npu\", dtype=torch.bfloat16)"
    ),
    "transformer_engine.common.recipe": "FP8 recipes have no NPU counterpart: remove them",
}


class TransformerEngine(CudaOnlyPackage):
    id = "NPU911"
    impact = "blocking"
    name = "transformer-engine"
    summary = "Report Transformer Engine imports and layers; suggest torch.nn layers and bf16 autocast"
    label = "Transformer Engine"
    packages = ("transformer_engine",)
    problem = "Transformer Engine's fused FP8/BF16 layers are CUDA-only"
    import_suggestion = (
        "use torch.nn layers (Linear, LayerNorm, RMSNorm) under torch.autocast(\"npu\", dtype=torch.bfloat16) "
        "instead; each use has its own finding"
    )
    uses = USES
    triggers = ("transformer_engine",)
    rationale = """
Transformer Engine provides fused layers and FP8 training for NVIDIA Hopper and
later GPUs. Its layers have plain `torch.nn` counterparts with the same
arguments for the common cases, and `fp8_autocast` is dropped in favour of bf16
autocast. Checkpoints saved by TE layers carry extra FP8 state (`_extra_state`),
so weights need a conversion step; that is why nothing is rewritten.
"""
    examples = (
        Example("import transformer_engine.pytorch as te  # reported\n"),
        Example("import torch\nlayer = torch.nn.Linear(1024, 1024)\n"),
    )
