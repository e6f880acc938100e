"""NPU932: AutoGPTQ (CUDA GPTQ kernels)."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example

ROUTE = (
    "load the unquantized (bf16) checkpoint on Ascend, or quantize for Ascend with its own tools (msModelSlim "
    "W8A8/W4A16 for MindIE/vllm-ascend); AutoGPTQ is unmaintained and its exllama/marlin/cuda kernels are CUDA-only"
)


USES = {"auto_gptq": ROUTE, "gptqmodel": ROUTE}


class AutoGptq(CudaOnlyPackage):
    id = "NPU932"
    impact = "blocking"
    name = "auto-gptq"
    summary = "Report AutoGPTQ / GPTQModel imports (CUDA GPTQ kernels)"
    label = "AutoGPTQ"
    packages = ("auto_gptq", "gptqmodel")
    problem = "AutoGPTQ's quantized linear layers run CUDA kernels (exllama, marlin, cuda, triton)"
    import_suggestion = ROUTE
    uses = USES
    triggers = ("auto_gptq", "gptqmodel")
    rationale = f"""
AutoGPTQ (and its successor GPTQModel) load GPTQ-quantized checkpoints through
CUDA kernels; transformers' `GPTQConfig` goes through them too. Route: {ROUTE}.
The requirement (`auto-gptq` in requirements files) is NPU851's.
"""
    examples = (
        Example("from auto_gptq import AutoGPTQForCausalLM  # reported\n"),
        Example("import torch\n"),
    )
