"""NPU902: xformers has no Ascend build."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

MEMORY_EFFICIENT = (
    'q, k, v are [batch, seqlen, heads, head_dim] ("BMHK"), i.e. input_layout "BSND": '
    'out = torch_npu.npu_fusion_attention(q, k, v, head_num=q.shape[2], input_layout="BSND", '
    "scale=scale or q.shape[-1] ** -0.5, keep_prob=1.0 - p)[0]; for attn_bias=LowerTriangularMask() add "
    "atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1), sparse_mode=2 "
    "(top-left aligned causal; LowerTriangularFromBottomRightMask is sparse_mode=3); a tensor bias goes to pse=. "
    "Portable alternative: torch.nn.functional.scaled_dot_product_attention on q/k/v transposed to [batch, heads, seqlen, head_dim]"
)
_MASKS = (
    "no mask objects on NPU: causal masks become sparse_mode (2 top-left, 3 bottom-right) with a 2048x2048 "
    "torch.triu(..., diagonal=1) bool atten_mask in torch_npu.npu_fusion_attention"
)

USES = {
    "xformers.ops.memory_efficient_attention": MEMORY_EFFICIENT,
    "xformers.ops.fmha.memory_efficient_attention": MEMORY_EFFICIENT,
    "xformers.ops.fmha.attn_bias": _MASKS,
    "xformers.ops.LowerTriangularMask": _MASKS,
    "xformers.ops.SwiGLU": (
        "write the block with torch ops (w3(F.silu(w1(x)) * w2(x))); torch_npu.npu_swiglu(torch.cat([a, b], -1)) "
        "fuses silu(a) * b"
    ),
}


class Xformers(CudaOnlyPackage):
    id = "NPU902"
    impact = "blocking"
    name = "xformers"
    summary = "Report xformers imports and memory_efficient_attention calls; suggest torch_npu.npu_fusion_attention"
    label = "xformers"
    packages = ("xformers",)
    problem = "xformers' attention kernels are CUDA-only; the package has no Ascend build"
    import_suggestion = (
        "use torch_npu.npu_fusion_attention (call sites have their own findings with the argument mapping) "
        "or torch.nn.functional.scaled_dot_product_attention"
    )
    uses = USES
    triggers = ("xformers",)
    rationale = """
xformers' fused attention (`memory_efficient_attention`) and its other ops are
CUDA kernels. On Ascend the fused attention is `torch_npu.npu_fusion_attention`;
xformers' `[B, M, H, K]` inputs are its `"BSND"` layout, `p` becomes
`keep_prob=1 - p`, and the default scale must be passed explicitly
(`q.shape[-1] ** -0.5`; the NPU op defaults to 1.0). Causal bias objects become
`sparse_mode` plus a 2048x2048 upper-triangular bool mask:
`LowerTriangularMask` is top-left aligned (`sparse_mode=2`),
`LowerTriangularFromBottomRightMask` bottom-right (`sparse_mode=3`).
`torch.nn.functional.scaled_dot_product_attention` is the portable alternative
(it runs on NPU, though torch_npu 2.13 does not promise a fused kernel behind it).
Reported, not rewritten: bias objects and layouts need a human decision.
"""
    examples = (
        Example("import xformers.ops as xops  # reported\n"),
        Example("import torch\nout = torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"),
    )
