"""NPU851: report CUDA-only packages in dependency files."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from npu_migrate.deps.rule import DepsRule, Example
from npu_migrate.tables.packages import CONDA_CUDA_ONLY, cuda_only, normalise


class CudaOnlyPackage(DepsRule):
    id = "NPU851"
    impact = "blocking"
    name = "cuda-only-package"
    summary = "Report CUDA-only packages (apex, flash-attn, xformers, bitsandbytes, triton, nvidia-*, cupy-cuda*...) with what to use on Ascend"
    fixable = False
    triggers = (b"apex", b"flash", b"xformers", b"bitsandbytes", b"triton", b"nvidia", b"cupy", b"nvml",
                b"tensorrt", b"transformer", b"gpustat", b"pycuda", b"onnxruntime", b"mamba", b"causal",
                b"deepspeed", b"grouped", b"deep_ep", b"deep-ep", b"nvshmem", b"cuda", b"cudnn", b"nccl", b"NVIDIA", b"Nvidia",
                b"cuml", b"cudf", b"cugraph", b"cuvs", b"cuspatial", b"cucim", b"rmm", b"raft")
    rationale = """
These distributions only work with NVIDIA GPUs: installing them on an Ascend
machine fails to build, or succeeds and fails at import or at the first kernel.
Each is reported on its line with the Ascend replacement
(`npu_migrate/tables/packages.py`, shared with the Python rules NPU9xx that
report the imports): apex, flash-attn, xformers, bitsandbytes, triton,
pynvml/nvidia-ml-py, gpustat, pycuda, tensorrt, torch-tensorrt,
transformer-engine, onnxruntime-gpu, mamba-ssm, causal-conv1d, grouped_gemm, every `nvidia-*`
(CUDA runtime wheels, `nvidia-dali-*`), `cupy-cuda*` and RAPIDS (`cuml`, `cudf`,
`cugraph`, `cuvs`, `rmm`... and their `-cu11`/`-cu12` builds); in conda
environments also cudatoolkit, pytorch-cuda, cuda-*, cudnn and nccl. A bare VCS or archive URL
(`git+https://github.com/Dao-AILab/causal-conv1d.git`, pip's form without a
name) is named by its `#egg=` fragment or its repository (`state-spaces/mamba`
is mamba-ssm). The line
is not removed: whether the code still needs the package is a decision for the
code's owner (the Python rules say where it is imported). `vllm` is not CUDA-only:
it runs on Ascend with the vllm-ascend plugin, which NPU964 pairs with it in pip
lists; NPU851 leaves those lines to NPU964 and notes the plugin for a conda one.
"""
    examples = (
        Example("torch==2.1.0\nflash-attn==2.5.6  # reported\nnvidia-cudnn-cu12  # reported\n"),
        Example("numpy\nrequests\n"),
    )

    def check(self, document) -> None:
        for lst in document.lists:
            for entry in lst.entries:
                name = entry.name if entry.name is not None else (None if lst.conda else url_name(entry.text))
                if name is None:
                    continue
                if normalise(name) == "vllm":
                    # vLLM runs on Ascend with its vllm-ascend plugin: NPU964 pairs the plugin
                    # with pip lists; "only works with NVIDIA GPUs" would contradict it
                    if entry.conda:
                        self.report_entry(entry, "`vllm` needs the vllm-ascend plugin on Ascend", cuda_only(name))
                    continue
                advice = CONDA_CUDA_ONLY.get(normalise(name)) if lst.conda else None
                advice = advice or cuda_only(name)
                if advice is not None:
                    self.report_entry(entry, f"`{name}` only works with NVIDIA GPUs", advice)


#: repositories whose distribution has another name than the repository
_REPOSITORY_DISTRIBUTION = {"state-spaces/mamba": "mamba-ssm", "nvidia/apex": "apex"}


def url_name(text: str) -> str | None:
    """The distribution a bare URL requirement installs (``git+https://github.com/
    Dao-AILab/causal-conv1d.git@v1.4`` -> ``causal-conv1d``), or None."""
    text = text.strip()
    if not re.match(r"(?:git|hg|svn|bzr)\+|https?://", text):
        return None
    url = urlsplit(re.sub(r"^(?:git|hg|svn|bzr)\+", "", text))
    egg = re.search(r"(?:^|&)egg=([A-Za-z0-9][\w.-]*)", url.fragment)
    if egg is not None:
        return egg.group(1)
    parts = [p for p in url.path.split("@", 1)[0].split("/") if p]
    if len(parts) < 2 or not url.netloc.endswith(("github.com", "gitlab.com")):
        return None
    repository = f"{parts[0]}/{re.sub(r'[.]git$', '', parts[1])}"
    return _REPOSITORY_DISTRIBUTION.get(repository.lower(), repository.split("/")[1])
