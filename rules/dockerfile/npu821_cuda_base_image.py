"""NPU821: CUDA base images in Dockerfiles."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.deps import pairing
from npu_migrate.dockerfile.rule import DockerfileRule, Example

if TYPE_CHECKING:
    from tree_sitter import Node

#: Where Ascend publishes its CANN images (the SWR "ascendhub" organisation).
CANN_IMAGE = "swr.cn-south-1.myhuaweicloud.com/ascendhub/cann"
_OS = re.compile(r"(ubuntu\d{2}\.\d{2}|openeuler[\d.]*)")
_TORCH = re.compile(r"^(\d+\.\d+)(?:\.\d+)?")
_NGC = re.compile(r"^(?:nvcr\.io/)?nvidia/", re.IGNORECASE)
#: a tag naming the CUDA release it is built for, as Ray's images do
#: (``rayproject/ray:2.40.0-py312-cu121``, ``anyscale/ray:2.57.0-py312-cu130``)
CUDA_TAG = re.compile(r"(?:^|[-_.])cu1\d{1,2}(?:$|[-_.])", re.IGNORECASE)
#: prefilter words for the tags above (the rules' ``triggers``)
CUDA_TAG_WORDS = (b"-cu11", b"-cu12", b"-cu13")


def cuda_image(reference: str) -> bool:
    """``nvidia/cuda:12.1.0-devel-ubuntu22.04``, ``nvcr.io/nvidia/pytorch:24.01-py3``,
    ``pytorch/pytorch:2.1.0-cuda11.8-cudnn8-runtime`` (and its ``latest``, a CUDA build),
    any image whose name or tag says ``cuda``, or whose tag names a CUDA release
    (``rayproject/ray:2.40.0-py312-cu121``)."""
    name, _, tag = reference.partition("@")[0].rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    name = name or reference
    if _NGC.match(name) or "cuda" in name.lower() or "cuda" in tag.lower() or CUDA_TAG.search(tag):
        return True
    return name.lower().endswith("pytorch/pytorch") and not tag.lower().startswith(("rocm",)) and "cpu" not in tag.lower()


def suggestion(reference: str) -> str:
    os_match = _OS.search(reference)
    base = f"{CANN_IMAGE}:<CANN version>-910b-{os_match.group(1) if os_match else 'ubuntu22.04'}-py3.11"
    tag = reference.rpartition(":")[2] if reference.startswith("pytorch/pytorch:") else ""
    torch = _TORCH.match(tag)
    pins = (f"torch=={torch.group(1)}.* torch-npu=={torch.group(1)}.*" if torch
            else "torch==X.Y.* torch-npu==X.Y.* (torch-npu X.Y requires torch X.Y exactly)")
    if torch and not pairing.paired(f"=={torch.group(1)}.*"):  # no torch-npu for that series (issue 37)
        pins = f"a torch with a torch-npu release; nearest: {pairing.nearest(f'=={torch.group(1)}.*')}"
    return (f"FROM {base} (Ascend's CANN image; take the CANN release your NPU driver supports and the chip "
            f"you run on: 910b, 910c...), then RUN pip install {pins}")


class CudaBaseImage(DockerfileRule):
    id = "NPU821"
    impact = "blocking"
    name = "docker-cuda-base-image"
    summary = "Report CUDA base images (`FROM nvidia/cuda...`, `pytorch/pytorch:*cuda*`, NGC) with the Ascend CANN image to use"
    fixable = False
    triggers = (b"cuda", b"nvidia", b"pytorch/pytorch", *CUDA_TAG_WORDS)
    rationale = """
An image built `FROM nvidia/cuda`, an NGC image (`nvcr.io/nvidia/pytorch`) or
`pytorch/pytorch` (whose builds, `latest` included, carry CUDA) holds the CUDA
runtime and a CUDA build of torch, neither of which runs on Ascend. The base
has to become one of Ascend's CANN images (published on Huawei's SWR registry
as `ascendhub/cann:<CANN>-<chip>-<os>-py<python>`), with torch and torch-npu
pip-installed on top in paired versions (torch-npu X.Y requires torch X.Y).
This is reported, not rewritten: the CANN release must match the NPU driver
of the machines, which the Dockerfile cannot tell. A tag built from build
arguments (`FROM nvidia/cuda:${CUDA_VERSION}-base-ubuntu${OS}`) is judged by its
written parts; a name that is itself an argument by the `ARG` default. Also reported: an `ARG`
default that names such an image (`ARG BASE=nvcr.io/nvidia/pytorch:24.01-py3`
then `FROM ${BASE}`). `ENV` and `RUN` lines are handled by the shell rules
(NPU801-NPU806).
"""
    examples = (
        Example("FROM nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04\nRUN pip install torch\n"),
        Example("FROM python:3.11-slim\nRUN pip install torch --index-url https://download.pytorch.org/whl/cpu\n"),
    )

    def visit_from_instruction(self, node: Node) -> None:
        spec = next((c for c in node.named_children if c.type == "image_spec"), None)
        if spec is None:
            return
        reference = spec.text.decode("utf-8", "replace")
        if "$" in reference:
            # `nvidia/cuda:${CUDA_VERSION}-base-ubuntu${OS}`: the name is written out, the tag
            # is built; judge what is literal (a name, or the text of the tag around `${...}`)
            name, _, tag = reference.partition(":")
            literal = re.sub(r"\$\{[^}]*\}|\$\w+", "", tag)
            if "$" in name or not cuda_image(f"{name}:{literal}" if tag else name):
                return
        if cuda_image(reference):
            self.report(spec, f"`{reference}` is a CUDA image; it does not run on Ascend NPUs", suggestion(reference))

    def visit_arg_instruction(self, node: Node) -> None:
        parts = node.named_children
        if len(parts) >= 2 and any(c.type == "=" for c in node.children):
            value = parts[-1]
            text = value.text.decode("utf-8", "replace").strip("\"'")
            if "/" in text and ":" in text and cuda_image(text):
                self.report(value, f"the default base image `{text}` is a CUDA image; it does not run on Ascend NPUs",
                            suggestion(text))
