"""NPU929: cpm_kernels (ChatGLM's int4/int8 quantization kernels)."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example

ROUTE = (
    "drop the int4/int8 quantization on Ascend (ChatGLM: no --quantization_bit / model.quantize(...)) and run the "
    "model in fp16/bf16; P-Tuning v2 on a 6B model fits one 32/64 GB NPU without it"
)


USES = {"cpm_kernels": ROUTE}


class CpmKernels(CudaOnlyPackage):
    id = "NPU929"
    impact = "blocking"
    name = "cpm-kernels"
    summary = "Report cpm_kernels (ChatGLM's CUDA quantization kernels)"
    label = "cpm_kernels"
    packages = ("cpm_kernels",)
    problem = "cpm_kernels loads precompiled CUDA kernels (fatbins) through the CUDA driver API"
    import_suggestion = ROUTE
    uses = USES
    triggers = ("cpm_kernels",)
    rationale = f"""
ChatGLM-6B's `model.quantize(bits)` (its `quantization.py`, downloaded with the
model) runs int4/int8 weight kernels from `cpm_kernels`, which ships CUDA
fatbins and calls the CUDA driver; ChatGLM-6B's `ptuning/train.sh` and
`evaluate.sh` pass `--quantization_bit 4`, and its requirements list
`cpm_kernels`. There is no Ascend build. Route: {ROUTE}. The launcher flag is
NPU937's, the requirement NPU851's.
"""
    examples = (
        Example("from cpm_kernels.kernels.base import LazyKernelCModule  # reported\n"),
        Example("import torch\n"),
    )
