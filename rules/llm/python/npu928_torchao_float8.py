"""NPU928: torchao float8 training."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example

ROUTE = (
    "train in bf16 on Ascend (Atlas A2/A3 cube units have no FP8 matmul): drop convert_to_float8_training / the "
    "float8 config and keep the bf16 autocast; torchao's other features (int8/int4 weight-only inference) are separate"
)


USES = {"torchao.float8": ROUTE, "torchao.prototype": ROUTE}


class TorchaoFloat8(CudaOnlyPackage):
    id = "NPU928"
    impact = "blocking"
    name = "torchao-float8"
    summary = "Report torchao float8 training (`convert_to_float8_training`, `Float8LinearConfig`)"
    label = "torchao float8"
    packages = ("torchao.float8", "torchao.prototype.mx_formats", "torchao.prototype.moe_training")
    problem = "torchao's float8 training runs FP8 matmuls (torch._scaled_mm) that need CUDA SM89+ GPUs"
    import_suggestion = ROUTE
    uses = USES
    triggers = ("torchao",)
    rationale = f"""
torchao's float8 training (`from torchao.float8 import convert_to_float8_training,
Float8LinearConfig`: diffusers' Flux2 DreamBooth scripts, LLaMA-Factory's
`fp8_backend: torchao` recipes) swaps `nn.Linear` for layers whose matmuls run
through `torch._scaled_mm` in FP8, which needs NVIDIA SM89+ (Ada/Hopper) or
recent AMD GPUs. Atlas A2/A3 NPUs have no FP8 matmul in torch_npu. Route:
{ROUTE}. The config key is NPU942's.
"""
    examples = (
        Example("from torchao.float8 import convert_to_float8_training  # reported\n"),
        Example("from torchao.quantization import quantize_\n"),
    )
