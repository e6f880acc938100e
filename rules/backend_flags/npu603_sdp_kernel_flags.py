"""NPU603: CUDA scaled-dot-product-attention kernel switches, reported."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example

from ._common import FlagUseRule

_CUDA = "torch.backends.cuda"
SDP_NAMES = frozenset(
    {
        "sdp_kernel",
        "enable_flash_sdp",
        "enable_mem_efficient_sdp",
        "enable_math_sdp",
        "enable_cudnn_sdp",
        "flash_sdp_enabled",
        "mem_efficient_sdp_enabled",
        "math_sdp_enabled",
        "cudnn_sdp_enabled",
        "can_use_flash_attention",
        "can_use_efficient_attention",
        "can_use_cudnn_attention",
        "SDPAParams",
        "SDPBackend",
    }
)
SUGGESTION = (
    "the CUDA flash / memory-efficient SDPA kernels do not exist on NPU; for fused attention call "
    "torch_npu.npu_fusion_attention(q, k, v, head_num, input_layout, ...) (note: torch.npu.sdp_kernel and "
    "torch.npu.enable_flash_sdp exist but, per torch_npu 2.13, only set the global flag)"
)


class SdpKernelFlags(FlagUseRule):
    id = "NPU603"
    impact = "informational"
    name = "sdp-kernel-flags"
    summary = "Report `torch.backends.cuda` SDPA kernel switches (`sdp_kernel`, `enable_flash_sdp`...) and point to `torch_npu.npu_fusion_attention`"
    fixable = False
    triggers = tuple(SDP_NAMES)
    rationale = """
`torch.backends.cuda.sdp_kernel(...)`, `enable_flash_sdp(...)` and the other
switches choose between CUDA attention kernels (FlashAttention, memory-efficient,
cuDNN). None of those kernels exists on NPU. torch_npu does define
`torch.npu.sdp_kernel`, `enable_flash_sdp`... (`npu/_backends.py`), but each one
warns that the device operator does not support it and only sets the global
flag, so a rename would look like a migration and do nothing. Ascend's fused
attention is `torch_npu.npu_fusion_attention(q, k, v, head_num, input_layout,
...)`, whose arguments differ from `scaled_dot_product_attention`; the port is
manual, so every use is reported. `torch.nn.attention.sdpa_kernel` (device
generic) is left alone.
"""
    examples = (
        Example("import torch\nwith torch.backends.cuda.sdp_kernel(enable_math=False):  # reported\n    pass\n"),
    )

    def check(self, node: cst.Attribute | cst.Name, qualified: str) -> None:
        if not qualified.startswith(_CUDA + "."):
            return
        if qualified[len(_CUDA) + 1 :].split(".", 1)[0] in SDP_NAMES:
            self.report(node, f"`{qualified}` selects a CUDA attention kernel", SUGGESTION)
