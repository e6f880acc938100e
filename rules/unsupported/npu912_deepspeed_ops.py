"""NPU912: DeepSpeed ops that only have CUDA builders."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

#: deepspeed/op_builder/npu/ (DeepSpeed's NPU accelerator) builds these; they work
#: on Ascend once DeepSpeed detects torch_npu.
NPU_BUILT = (
    "deepspeed.ops.adam",
    "deepspeed.ops.lamb",
    "deepspeed.ops.lion",
    "deepspeed.ops.adagrad",
    "deepspeed.ops.aio",
    "deepspeed.ops.quantizer",
    "deepspeed.ops.transformer.inference",
    "deepspeed.ops.op_builder",
)


class DeepspeedOps(CudaOnlyPackage):
    id = "NPU912"
    impact = "blocking"
    name = "deepspeed-cuda-ops"
    summary = "Report DeepSpeed ops that have no NPU builder (sparse attention, training transformer kernels, ...)"
    label = "DeepSpeed CUDA ops"
    packages = ("deepspeed.ops",)
    exempt = NPU_BUILT
    problem = (
        "this DeepSpeed op only has a CUDA builder; DeepSpeed's NPU accelerator provides Adam, LAMB, Lion, "
        "Adagrad, AIO, quantizer and inference builders, not this one"
    )
    import_suggestion = (
        "use the plain PyTorch module instead (e.g. torch.nn.TransformerEncoderLayer or your own layer with "
        "torch_npu.npu_fusion_attention for attention), or one of the ops DeepSpeed builds for NPU "
        "(deepspeed.ops.adam.FusedAdam, DeepSpeedCPUAdam, FusedLamb, FusedLion)"
    )
    triggers = (("deepspeed", "ops"),)
    local_names = ("deepspeed.ops",)  # `ops` alone is every `torch.ops`
    rationale = """
DeepSpeed selects op builders per accelerator. With torch_npu installed its NPU
accelerator builds FusedAdam, CPUAdam, CPUAdagrad, FusedLamb, FusedLion, CPULion,
AsyncIO, PinMemory, quantizer and inference ops (`op_builder/npu/`), so imports of
`deepspeed.ops.adam` and friends are left alone. Everything else under
`deepspeed.ops` (sparse attention, the training transformer kernels, evoformer
attention, random-LTD, FP quantizer, ...) falls back to a not-implemented builder
and fails when loaded; those imports and uses are reported.
"""
    examples = (
        Example("from deepspeed.ops.sparse_attention import SparseSelfAttention  # reported\n"),
        Example("from deepspeed.ops.adam import FusedAdam\n"),
    )
