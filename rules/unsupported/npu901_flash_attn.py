"""NPU901: flash-attn has no Ascend build; its calls map to torch_npu.npu_fusion_attention."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage, best_match

_CAUSAL = (
    "; for causal=True add atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), "
    "diagonal=1), sparse_mode=3 (flash-attn aligns the causal mask to the bottom-right corner, which is NPU "
    "sparse_mode 3); window_size=(left, right) becomes the same mask with sparse_mode=4, pre_tockens=left, "
    "next_tockens=right"
)

DENSE = (
    'q, k, v are [batch, seqlen, heads, head_dim], i.e. input_layout "BSND": '
    'out = torch_npu.npu_fusion_attention(q, k, v, head_num=q.shape[2], input_layout="BSND", '
    "scale=softmax_scale or q.shape[-1] ** -0.5, keep_prob=1.0 - dropout_p)[0]"
    + _CAUSAL
    + "; the op returns a tuple whose first item is the attention output; k/v may have fewer heads (GQA) "
    "if q's head count is a multiple of theirs"
)
VARLEN = (
    'q, k, v are [total_tokens, heads, head_dim], i.e. input_layout "TND": '
    'out = torch_npu.npu_fusion_attention(q, k, v, head_num=q.shape[1], input_layout="TND", '
    "actual_seq_qlen=cu_seqlens_q[1:].tolist(), actual_seq_kvlen=cu_seqlens_k[1:].tolist(), "
    "scale=softmax_scale or q.shape[-1] ** -0.5, keep_prob=1.0 - dropout_p)[0] "
    "(the NPU op takes the cumulative lengths without the leading 0; max_seqlen_q/k are not needed)" + _CAUSAL
)
_INFERENCE = (
    "update the cache yourself (k_cache[:, start:end] = k), then "
    'out = torch_npu.npu_fused_infer_attention_score(q, k_cache, v_cache, num_heads=q.shape[2], input_layout="BSND", '
    "scale=softmax_scale or q.shape[-1] ** -0.5, actual_seq_lengths_kv=cache_seqlens.tolist())[0]"
)
_ROTARY = (
    "torch_npu.npu_rotary_mul(x, cos, sin) for x in [batch, seqlen, heads, head_dim]; it wants full-width, "
    "4-D cos/sin ([1, seqlen, 1, head_dim]: torch.cat([cos, cos], -1)[None, :, None, :]) where flash-attn takes "
    "half-width 2-D tables; pass rotary_mode='interleave' for interleaved=True"
)
_RMS = "torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0], or torch.nn.RMSNorm(hidden_size, eps=eps)"
_INTERFACES = ("flash_attn", "flash_attn.flash_attn_interface")


def _both(name: str, suggestion: str) -> dict[str, str]:
    return {f"{module}.{name}": suggestion for module in _INTERFACES}


USES = {
    **_both("flash_attn_func", DENSE),
    **_both("flash_attn_qkvpacked_func", "q, k, v = qkv.unbind(dim=2) ([batch, seqlen, 3, heads, head_dim]), then " + DENSE),
    **_both("flash_attn_kvpacked_func", "k, v = kv.unbind(dim=2) ([batch, seqlen, 2, heads, head_dim]), then " + DENSE),
    **_both("flash_attn_varlen_func", VARLEN),
    **_both(
        "flash_attn_varlen_qkvpacked_func",
        "q, k, v = qkv.unbind(dim=1) ([total, 3, heads, head_dim]) and cu_seqlens_q = cu_seqlens_k = cu_seqlens, then "
        + VARLEN,
    ),
    **_both("flash_attn_varlen_kvpacked_func", "k, v = kv.unbind(dim=1) ([total, 2, heads, head_dim]), then " + VARLEN),
    **_both("flash_attn_with_kvcache", _INFERENCE),
    "flash_attn.layers.rotary": _ROTARY,
    "flash_attn.ops.rms_norm": _RMS,
    "flash_attn.ops.triton.layer_norm.RMSNorm": _RMS,
    "flash_attn.ops.triton.layer_norm.rms_norm_fn": _RMS,
    "flash_attn.ops.layer_norm": "torch.nn.functional.layer_norm / torch.nn.LayerNorm (plus torch.nn.functional.dropout for the fused dropout-add)",
    "flash_attn.losses.cross_entropy": "torch.nn.CrossEntropyLoss (ignore_index and label_smoothing carry over)",
    "flash_attn.bert_padding": (
        "pad_input/unpad_input/index_first_axis are plain torch code, but importing them loads flash-attn's CUDA "
        "extension: copy the helpers into your project"
    ),
    "flash_attn.modules.mha": "torch.nn.MultiheadAttention, or your own attention module calling torch_npu.npu_fusion_attention",
}
#: the route an import of flash-attn's non-attention modules gets (their uses keep USES)
_NOT_ATTENTION = ("flash_attn.layers", "flash_attn.ops", "flash_attn.losses", "flash_attn.bert_padding")
IMPORT_ROUTES = {
    **{name: route for name, route in USES.items() if name.startswith(_NOT_ATTENTION)},
    "flash_attn.ops.fused_dense": (
        "torch.nn.Linear (plus the activation for FusedMLP): the fused GEMM + bias (+ GELU) comes from flash-attn's "
        "`fused_dense_lib` CUDA extension"
    ),
}


class FlashAttn(CudaOnlyPackage):
    id = "NPU901"
    impact = "blocking"
    name = "flash-attn"
    summary = "Report flash-attn imports and calls; suggest torch_npu.npu_fusion_attention with the argument mapping"
    label = "flash-attn"
    packages = ("flash_attn", "flash_attn_2_cuda", "flash_attn_interface")
    problem = "flash-attn is built from CUDA kernels; it neither installs nor imports on an Ascend machine"
    import_suggestion = (
        "call torch_npu.npu_fusion_attention instead (each call site has its own finding with the argument "
        "mapping), or torch.nn.functional.scaled_dot_product_attention for a portable path"
    )
    uses = USES
    triggers = ("flash_attn*",)

    def suggestion_for_import(self, hits: list[str]) -> str:
        """An import of flash-attn's layer-norm, rotary, dense or loss modules gets their route
        (safari's `from flash_attn.ops.layer_norm import dropout_add_layer_norm` was told to call
        npu_fusion_attention); attention imports keep the package's."""
        routes = {best_match(h, IMPORT_ROUTES) for h in hits}
        (route,) = routes if len(routes) == 1 else (None,)
        return route if route is not None else self.import_suggestion
    rationale = """
flash-attn ships CUDA kernels only, so `import flash_attn` fails on Ascend (the
package imports its compiled extension at import time, even for the pure-torch
`bert_padding` helpers). The Ascend counterpart of `flash_attn_func` is
`torch_npu.npu_fusion_attention(query, key, value, head_num, input_layout, pse=None,
padding_mask=None, atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens, next_tockens,
inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
sparse_mode=0, ...)` (signature from the torch-npu 2.13.0 wheel). It returns a tuple;
the first item is the output. The mapping, reported at every call site:

| flash-attn | npu_fusion_attention |
|---|---|
| q/k/v `[B, S, H, D]` | `input_layout="BSND"`, `head_num=q.shape[2]` |
| varlen q/k/v `[T, H, D]` + `cu_seqlens` | `input_layout="TND"`, `actual_seq_qlen=cu_seqlens_q[1:].tolist()` (same for kv) |
| `softmax_scale=None` | `scale=q.shape[-1] ** -0.5` (the NPU default is 1.0, not 1/sqrt(D)) |
| `dropout_p` | `keep_prob=1.0 - dropout_p` |
| `causal=True` | `atten_mask=torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)`, `sparse_mode=3` |
| `window_size=(l, r)` | same mask, `sparse_mode=4`, `pre_tockens=l`, `next_tockens=r` |

The rewrite is not automatic because the layout, the scale default and the mask
convention all differ, and a wrong guess produces silently wrong attention.
Imports are reported once per statement; imports inside try/if/functions get a
softer message because the code usually already has a fallback. An import of
flash-attn's rotary, layer-norm, dense or loss modules (`flash_attn.layers`,
`flash_attn.ops`, `flash_attn.losses`: wrappers of its `rotary_emb`,
`dropout_layer_norm`, `fused_dense_lib` and `xentropy_cuda_lib` extensions) gets the
route of what it holds (`npu_rotary_mul`, `npu_rms_norm`, `torch.nn.Linear`,
`torch.nn.CrossEntropyLoss`) instead of the attention route.
"""
    examples = (
        Example("from flash_attn import flash_attn_func  # reported\n"),
        Example(
            "try:\n"
            "    from flash_attn import flash_attn_func  # reported: guarded import\n"
            "except ImportError:\n"
            "    flash_attn_func = None\n"
        ),
        Example("import torch\nout = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n"),
    )
