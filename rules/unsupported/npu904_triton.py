"""NPU904: Triton kernels written for CUDA GPUs."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

KERNEL = (
    "replace the kernel with torch ops or a torch_npu fused op (torch_npu.npu_rms_norm, torch_npu.npu_rotary_mul, "
    "torch_npu.npu_swiglu, torch_npu.npu_fusion_attention), or port it to triton-ascend and re-tune it: "
    "num_warps/num_stages and autotune configs are tuned for CUDA GPUs"
)


class Triton(CudaOnlyPackage):
    id = "NPU904"
    impact = "blocking"
    name = "triton-kernel"
    summary = "Report Triton and Helion imports and @triton.jit / @triton.autotune / @triton.heuristics / @helion.kernel kernels"
    label = "Triton"
    packages = ("triton", "helion")
    problem = (
        "Triton kernels written for CUDA GPUs do not run on Ascend as they are; the NPU needs the triton-ascend "
        "backend and usually changes to the kernel"
    )
    import_suggestion = KERNEL
    uses = {"triton.jit": KERNEL, "triton.autotune": KERNEL, "triton.heuristics": KERNEL, "helion.kernel": KERNEL}
    triggers = ("triton", "helion")
    rationale = """
Upstream Triton compiles for NVIDIA and AMD GPUs. Ascend has its own backend,
triton-ascend (torch_npu 2.13's inductor integration warns "triton-ascend is not
installed" without it), but kernels tuned for CUDA (warps, stages, block sizes,
autotune configs) need review and often rewriting. Most hand-written kernels in
training code are fused norms, rotary embeddings, activations or attention, for
which torch_npu has fused ops (`npu_rms_norm`, `npu_rotary_mul`, `npu_swiglu`,
`npu_fusion_attention`). Each import statement and each kernel decorator is
reported; `tl.*` calls inside a kernel are not reported one by one.

Helion (`import helion`, `@helion.kernel`) compiles its kernels to Triton for
CUDA GPUs, so it is the same case: reported, and a `x.is_cuda and ...` test in
front of a Helion kernel is a kernel gate (NPU011) that stays as it is.
"""
    examples = (
        Example("import triton  # reported\n"),
        Example("import torch\nmodel = torch.compile(model, backend='npu')\n"),
    )
