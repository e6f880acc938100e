"""NPU927: HF Hub kernels (``kernels.get_kernel``): CUDA builds unless the repo has a CANN one."""

from __future__ import annotations

from npu_migrate.rules.unsupported._common import CudaOnlyPackage

from npu_migrate.python.rule import Example

ROUTE = (
    "kernels 0.17.2 loads the build variant of the running backend and detects Ascend as CANN: keep get_kernel only if "
    "the repo publishes a CANN build; otherwise use torch_npu's fused ops (attention: attn_implementation=\"sdpa\" or "
    "torch_npu.npu_fusion_attention; norms: torch_npu.npu_rms_norm; activations: torch_npu.npu_swiglu)"
)


USES = {"kernels": ROUTE}


class HubKernels(CudaOnlyPackage):
    id = "NPU927"
    impact = "blocking"
    name = "hub-kernels"
    summary = "Report Hugging Face Hub kernels (`kernels.get_kernel(...)`); they load only where the repo has a CANN build"
    label = "Hugging Face Hub kernels"
    packages = ("kernels",)
    problem = "Hub kernels are prebuilt per backend; kernels-community repositories publish CUDA (and ROCm/XPU/Metal) builds"
    import_suggestion = ROUTE
    uses = USES
    triggers = ("kernels",)
    local_names = ("kernels.get_kernel", "kernels.kernelize", "kernels.use_kernel_forward_from_hub", "kernels.LayerRepository")
    rationale = f"""
The `kernels` package downloads compiled kernels from the Hub
(`get_kernel("kernels-community/flash-attn3")`, `kernelize(model)`,
`@use_kernel_forward_from_hub`) and picks the build that matches the running
torch: kernels 0.17.2 (its `backends` detection) knows CUDA, ROCm, Metal, XPU,
Neuron and, through torch_npu, CANN. A kernel repository without a CANN build
fails to load on Ascend. Route: {ROUTE}. Only imports of the top-level
`kernels` package are matched (a project's own `kernels/` package is another
module: relative imports and project modules are not `kernels`, including a
directory `kernels/` without `__init__.py` beside the importing file or above it,
as in Swin-Transformer's `from kernels.window_process.window_process import ...`).
"""
    examples = (
        Example("from kernels import get_kernel  # reported\n"),
        Example("from .kernels import fused_rms_norm\n"),
    )

    def is_target(self, qualified: str) -> bool:
        # a project's own top-level `kernels` package (modded-nanogpt style) is CUDA-only code NPU904/NPU905 handle
        if self.ctx.facts.is_cuda_only_module("kernels"):
            return False
        # a `kernels` module or directory of the project itself (Swin-Transformer's
        # kernels/window_process, a CUDA extension) is not the Hub package either
        if self.ctx.facts.is_project_module(self.ctx.path, qualified):
            return False
        return super().is_target(qualified)
