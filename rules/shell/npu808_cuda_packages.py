"""NPU808: ``pip install`` / ``conda install`` of CUDA-only packages in scripts and Dockerfiles."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.deps import pairing
from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule
from npu_migrate.tables.packages import (
    CUDA_INDEX_URL,
    CUDA_LOCAL_VERSION,
    cuda_only,
    normalise,
)

from ._pip import PIP_VALUE_OPTIONS
from ._pip import distribution as _distribution
from ._pip import pip_words as _pip_words

if TYPE_CHECKING:
    from tree_sitter import Node

_CONDA_CUDA = re.compile(r"(?:cudatoolkit|pytorch-cuda|cuda-toolkit|cuda-\w+|cudnn|nccl)(?:[=<>].*)?$")
_PAIRING = "torch-npu X.Y requires torch X.Y exactly"
#: System packages of NVIDIA's repositories (apt, yum, dnf).
_SYSTEM_CUDA = re.compile(r"(?:cuda[-\w.]*|libcudnn\w*[-\w.]*|cudnn[-\w.]*|libnccl[-\w.*]*|nvidia-[-\w.]+|datacenter-gpu-manager\S*)(?:=.*)?")
_SYSTEM_MANAGERS = {"apt-get", "apt", "yum", "dnf", "microdnf"}


class ShellCudaPackages(ShellRule):
    id = "NPU808"
    impact = "blocking"
    name = "shell-cuda-packages"
    summary = "Report `pip install` / `conda install` of CUDA-only packages, CUDA builds and CUDA wheel indexes; ask for torch-npu next to torch"
    triggers = (b"install",)
    fixable = False
    rationale = """
Launch scripts and Dockerfiles install what the job needs. On Ascend, CUDA-only
packages do not install or do not import (apex, flash-attn, xformers,
bitsandbytes, triton, `nvidia-*` wheels, `cupy-cuda*`, pynvml, DALI, TensorRT,
Transformer Engine...), CUDA builds (`torch==2.1.0+cu118`) and CUDA wheel
indexes (`--index-url https://download.pytorch.org/whl/cu118`) give the wrong
torch, and `conda install pytorch-cuda=11.8 cudatoolkit` pulls the CUDA
runtime, and so do `apt-get install cuda-toolkit-12-8 libcudnn9 libnccl2`. Each
is reported with what to use instead (the table
`npu_migrate/tables/packages.py`, shared with the dependency-file rules). A
`pip install` of torch without torch-npu in the same command is reported with
the pairing rule (torch-npu X.Y requires torch X.Y exactly); the CPU build of
torch is the one to install (`--index-url https://download.pytorch.org/whl/cpu`).
"""
    examples = (
        Example("pip install flash-attn==2.5.8 --no-build-isolation  # reported\n"),
        Example("pip install torch==2.1.0 torch-npu==2.1.0.post3 numpy\n"),
    )

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        if not words:
            return
        pip = _pip_words(words)
        if pip is not None:
            self._pip(node, pip)
        elif syntax.program(words[0]) in ("conda", "mamba", "micromamba") and len(words) > 1 \
                and words[1].text == "install":
            self._conda(node, words[2:])
        elif syntax.program(words[0]) in _SYSTEM_MANAGERS and len(words) > 1 and words[1].text == "install":
            for word in words[2:]:
                if _SYSTEM_CUDA.fullmatch(word.text.strip("\"'")):
                    self._found(node, word, f"`{word.text}` is a package of NVIDIA's CUDA repository",
                                "the CANN toolkit (Ascend's base image, or the CANN installer) provides the NPU runtime;"
                                " drop the CUDA packages")

    def _pip(self, node: Node, words: list[syntax.Arg]) -> None:
        torch: syntax.Arg | None = None
        torch_spec = ""
        has_npu = False
        skip = False
        for word in words:
            text = word.text
            if skip:
                skip = False
                self._url(node, word)
                continue
            if text.startswith("-"):
                skip = text in PIP_VALUE_OPTIONS
                if "=" in text:
                    self._url(node, word)
                continue
            self._url(node, word)
            found = _distribution(text.strip("\"'"))
            if found is None:
                continue
            name, spec = found
            key = normalise(name)
            if key in ("torch-npu",):
                has_npu = True
            elif key == "torch":
                torch, torch_spec = word, spec
            advice = cuda_only(key)
            if advice is not None:
                what = "needs the vllm-ascend plugin on Ascend" if key == "vllm" else "is a CUDA-only package"
                self._found(node, word, f"`{name}` {what}", advice)
            elif CUDA_LOCAL_VERSION.search(text):
                self._found(node, word, f"`{text}` is a CUDA build", "install the CPU build of torch with torch-npu "
                            f"next to it ({_PAIRING})")
        if torch is not None and not has_npu:
            version = re.search(r"(\d+\.\d+)", torch_spec)
            pins = f"torch-npu=={version.group(1)}.*" if version else "torch-npu matching the torch version"
            series = pairing.minor_series(torch_spec) if torch_spec else None
            if series is not None and not pairing.paired(torch_spec):
                why, route = pairing.unpaired(f"torch{torch_spec}", torch_spec, series)
                self._found(node, torch, "torch is installed without torch-npu",
                            f"{why.replace(', so none is added', '')}; {route}")
                return
            self._found(node, torch, "torch is installed without torch-npu", f"add {pins} to this install ({_PAIRING})")

    def _conda(self, node: Node, words: list[syntax.Arg]) -> None:
        for index, word in enumerate(words):
            text = word.text.strip("\"'")
            channel = index > 0 and words[index - 1].text in ("-c", "--channel") and text == "nvidia"
            if channel or _CONDA_CUDA.fullmatch(text):
                self._found(node, word, f"`{text}` brings the CUDA runtime",
                            "install torch from pip (CPU build) and torch-npu next to it; the CANN toolkit provides the NPU runtime")

    def _url(self, node: Node, word: syntax.Arg) -> None:
        if CUDA_INDEX_URL.search(word.text):
            self._found(node, word, "a package index of CUDA builds",
                        f"use https://download.pytorch.org/whl/cpu for torch (or PyPI) and install torch-npu ({_PAIRING})")

    def _found(self, node: Node, word: syntax.Arg, message: str, suggestion: str) -> None:
        start = word.pieces[0].start if word.pieces and word.pieces[0].start is not None else word.node.start_byte
        self.report(node, message, suggestion, start)
