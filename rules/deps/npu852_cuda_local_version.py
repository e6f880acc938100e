"""NPU852: report ``+cuXXX`` local versions (CUDA builds) in dependency files."""

from __future__ import annotations

from npu_migrate.deps import pairing
from npu_migrate.deps.rule import DepsRule, Example


class CudaLocalVersion(DepsRule):
    id = "NPU852"
    impact = "blocking"
    name = "cuda-local-version"
    summary = "Report `+cuXXX` local versions (`torch==2.1.0+cu118`): CUDA builds that do not exist for Ascend"
    fixable = False
    triggers = (b"+cu",)
    rationale = """
`torch==2.1.0+cu118` names the CUDA 11.8 build of torch from PyTorch's CUDA
wheel index. torch-npu runs on the CPU build of torch: on aarch64 servers
(Kunpeng) PyPI's `torch==2.1.0` is that build; on x86_64 it is
`torch==2.1.0+cpu` from `https://download.pytorch.org/whl/cpu`. The label is
reported, not removed, because which one is right depends on the machine.
"""
    examples = (
        Example("torch==2.1.0+cu118  # reported\n"),
        Example("torch==2.1.0+cpu\n"),
    )

    def check(self, document) -> None:
        for lst in document.lists:
            for entry in lst.entries:
                label = pairing.local_cuda_label(entry.text)
                if label is not None:
                    plain = pairing.without_local(entry.text)
                    self.report_entry(entry, f"`{label}` names a CUDA build of {entry.name or 'the package'}",
                                      f"use `{plain}` (aarch64, PyPI) or the `+cpu` build from "
                                      "https://download.pytorch.org/whl/cpu (x86_64): torch-npu runs on torch's CPU build")
