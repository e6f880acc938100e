"""NPU958: flash-attn's compiled CUDA extensions imported by their own names."""

from __future__ import annotations

from npu_migrate.python.rule import Example
from npu_migrate.rules.cluster.python._common import ExternalCudaOnly

#: extension module -> what it does and the Ascend route (torch_npu names are in
#: npu_migrate/data/torch_npu_api.json)
ROUTES = {
    "xentropy_cuda_lib": "fused cross-entropy: use torch.nn.functional.cross_entropy (or torch_npu.npu_cross_entropy_loss)",
    "dropout_layer_norm": ("fused dropout + residual + LayerNorm/RMSNorm: use torch_npu.npu_rms_norm for RMSNorm "
                           "(torch_npu.npu_add_rms_norm with the residual add) or torch.nn.functional.layer_norm"),
    "rotary_emb": "rotary embedding: use torch_npu.npu_rotary_mul",
    "fused_dense_lib": "fused linear + GELU: use torch.nn.functional.linear and gelu",
    "flash_attn_2_cuda": "FlashAttention-2 kernels: use torch_npu.npu_fusion_attention (or SDPA)",
    "flash_attn_cuda": "FlashAttention kernels: use torch_npu.npu_fusion_attention (or SDPA)",
    "flash_attn_3_cuda": "FlashAttention-3 (Hopper) kernels: use torch_npu.npu_fusion_attention (or SDPA)",
    "flash_attn_interface": "FlashAttention-3 (Hopper) interface: use torch_npu.npu_fusion_attention (or SDPA)",
    "ft_attention": "FasterTransformer decoding attention: no Ascend build; use the model's own attention",
    "fused_softmax_lib": "fused masked softmax: use torch_npu.npu_scaled_masked_softmax",
}


class FlashAttnExtensions(ExternalCudaOnly):
    id = "NPU958"
    impact = "blocking"
    name = "flash-attn-extensions"
    summary = ("Report imports of flash-attn's compiled CUDA extensions (`xentropy_cuda_lib`, `dropout_layer_norm`, "
               "`rotary_emb`, ...) with the torch_npu op to use")
    label = "a flash-attn CUDA extension"
    packages = tuple(ROUTES)
    problem = "a CUDA extension built from flash-attn's csrc/, with no Ascend build: the import fails"
    import_suggestion = "use the torch / torch_npu counterpart named for each extension"
    triggers = tuple(ROUTES)
    rationale = """
flash-attn builds its fused kernels as top-level extension modules
(`csrc/xentropy` -> `xentropy_cuda_lib`, `csrc/layer_norm` -> `dropout_layer_norm`,
`csrc/rotary` -> `rotary_emb`, `csrc/fused_dense_lib`, `flash_attn_2_cuda`); model
code imports them directly at module level, so a whole package fails at import
on Ascend. Each import is reported with the op to use instead:

""" + "\n".join(f"- `{name}`: {route}" for name, route in ROUTES.items()) + """

torch_npu names are checked against the torch_npu API table
(`npu_migrate/data/torch_npu_api.json`, torch_npu 2.13.0). A module of the
project's own with one of these names is not reported.
"""
    examples = (
        Example("import xentropy_cuda_lib  # reported\n"),
        Example("import torch.nn.functional as F\n"),
    )

    def _import(self, node) -> None:
        from npu_migrate.rules.unsupported._common import guard, imported_names

        hits = [name for name in imported_names(node) if self.is_target(name)]
        if not hits:
            return
        self._imported.update(hits)
        where = guard(self.ctx, node, imports=True)
        for name in hits:
            what, route = ROUTES[name.split(".")[0]].split(": ", 1)
            if where:
                message = f"guarded import of `{name}` ({what}, {where}): make sure the fallback is the path taken on NPU"
            else:
                message = f"`{name}` ({what}): {self.problem}"
            self.report(node, message, route)
