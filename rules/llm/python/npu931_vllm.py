"""NPU931: vLLM needs its Ascend plugin, vllm-ascend."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example
from npu_migrate.rules.cluster._vllm import ROUTE


class Vllm(CudaOnlyPackage):
    id = "NPU931"
    impact = "blocking"
    name = "vllm"
    summary = "Report vLLM imports: on Ascend vLLM runs through the vllm-ascend plugin"
    label = "vLLM"
    packages = ("vllm",)
    problem = "vLLM's own wheels target CUDA; Ascend support is the separate vllm-ascend plugin"
    import_suggestion = ROUTE
    triggers = ("vllm",)
    rationale = f"""
vLLM (FastChat's `vllm_worker.py`, LLaMA-Factory's `vllm_infer.py`, evaluation
and RL rollouts) is built for CUDA; on Ascend it runs through the vllm-ascend
platform plugin, which vLLM discovers at start-up. Route: {ROUTE}. Only
imports are reported: the code itself does not change.
"""
    examples = (
        Example("from vllm import LLM, SamplingParams  # reported\n"),
        Example("import torch\n"),
    )
