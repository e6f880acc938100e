"""NPU915: state-space and scan kernel packages (mamba-ssm, causal-conv1d, accelerated-scan)."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage


class SsmKernels(CudaOnlyPackage):
    id = "NPU915"
    impact = "blocking"
    name = "ssm-kernels"
    summary = "Report imports of Mamba/SSM kernel packages (mamba_ssm, causal_conv1d, selective-scan and scan extensions)"
    label = "a state-space kernel package"
    packages = ("mamba_ssm", "causal_conv1d", "causal_conv1d_cuda", "selective_scan_cuda", "accelerated_scan",
                "mamba_chunk_scan", "fla")
    problem = "its kernels are CUDA (or CUDA-only Triton) builds with no Ascend counterpart: the import or the first call fails"
    import_suggestion = (
        "use the model's pure-torch path on the NPU (transformers' Mamba/Mamba-2 layers fall back to torch_forward "
        "without these packages), or port the scan as an Ascend C operator"
    )
    triggers = ("mamba_ssm", "causal_conv1d", "selective_scan_cuda", "accelerated_scan", "mamba_chunk_scan",
                ("fla", "import"))
    rationale = """
Mamba-style models get their speed from kernels built for NVIDIA GPUs:
`mamba_ssm` (selective scan as a CUDA extension, `selective_scan_cuda`, and
Mamba-2's chunked scan in Triton, `mamba_ssm.ops.triton`), `causal_conv1d` (and
its extension module `causal_conv1d_cuda`), `accelerated_scan` (CUDA/Triton
scans) and flash-linear-attention (`fla`, Triton). None has an Ascend build, and
`pip install` of the first two compiles CUDA code. Each import is reported; a
guarded import (`try: ... except ImportError`) is reported as such, since the
fallback is what runs on Ascend. Project modules with these names are the
project's own and not reported.
"""
    def is_target(self, qualified: str) -> bool:
        return super().is_target(qualified) and not self.ctx.facts.is_project_module(self.ctx.path, qualified)

    examples = (
        Example("import causal_conv1d_cuda  # reported\n"),
        Example("from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined  # reported\n"),
        Example("import torch\nfrom transformers import MambaForCausalLM\n"),
    )
