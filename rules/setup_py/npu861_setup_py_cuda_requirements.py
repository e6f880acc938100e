"""NPU861: CUDA-only packages, ``+cuXXX`` builds and CUDA wheel URLs in setup.py's requirements."""

from __future__ import annotations

from npu_migrate.deps import pairing
from npu_migrate.python.rule import Example
from npu_migrate.tables.packages import CUDA_INDEX_URL, cuda_only, normalise

from ._requirements import SetupRequirementsRule


class SetupPyCudaRequirements(SetupRequirementsRule):
    id = "NPU861"
    impact = "blocking"
    name = "setup-py-cuda-requirements"
    summary = "Report CUDA-only packages, `+cuXXX` builds and CUDA wheel URLs in setup.py's literal requirement lists"
    fixable = False
    rationale = """
The setup.py counterpart of NPU851, NPU852 and NPU853, with the same table
(`npu_migrate/tables/packages.py`): apex, flash-attn, xformers, bitsandbytes,
triton, `nvidia-*`, `cupy-cuda*`, pynvml, tensorrt, transformer-engine... in
`install_requires` / `extras_require`, a `+cu118` local version, or a
`name @ https://download.pytorch.org/whl/cu118/...` URL, each on its line with
what to use on Ascend.
"""
    examples = (
        Example("from setuptools import setup\nsetup(name='x', install_requires=[\n    'flash-attn>=2',  # reported\n])\n"),
        Example("from setuptools import setup\nsetup(name='x', install_requires=['numpy'])\n"),
    )

    def check(self, lists) -> None:
        for lst in lists:
            for element, text in lst.items:
                requirement = pairing.parse(text)
                if requirement is None:
                    continue
                advice = cuda_only(requirement.name)
                if advice is not None:
                    # vLLM runs on Ascend with the vllm-ascend plugin (NPU964): not "NVIDIA only"
                    what = ("needs the vllm-ascend plugin on Ascend" if normalise(requirement.name) == "vllm"
                            else "only works with NVIDIA GPUs")
                    self.report(element, f"`{requirement.name}` {what}", advice)
                label = pairing.local_cuda_label(str(requirement.specifier))
                if label is not None:
                    self.report(element, f"`{label}` names a CUDA build of {requirement.name}",
                                f"use `{pairing.without_local(text)}` (aarch64) or the `+cpu` build (x86_64): "
                                "torch-npu runs on torch's CPU build")
                if requirement.url and CUDA_INDEX_URL.search(requirement.url):
                    self.report(element, f"`{requirement.url}` is a CUDA build",
                                "install torch from PyPI (aarch64) or https://download.pytorch.org/whl/cpu (x86_64)")
