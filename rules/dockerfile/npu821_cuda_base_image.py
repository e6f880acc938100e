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
#: NGC: every image of NVIDIA's registry (``nvcr.io/nvidia/...``, ``nvcr.io/nvidian/...``,
#: ``nvcr.io/nim/...``: CUDA builds) and Docker Hub's ``nvidia/`` organisation
_NGC = re.compile(r"^(?:nvcr\.io/|nvidia/)", re.IGNORECASE)
#: a tag naming the CUDA release it is built for, as Ray's images do
#: (``rayproject/ray:2.40.0-py312-cu121``, ``anyscale/ray:2.57.0-py312-cu130``)
CUDA_TAG = re.compile(r"(?:^|[-_.])cu1\d{1,2}(?:$|[-_.])", re.IGNORECASE)
#: a tag naming the CUDA builds of vLLM or Transformer Engine it bundles (verl's
#: ``verlai/verl:app-verl0.4-vllm0.8.5-mcore0.12.2-te2.2``, held-out round 20's CosyVoice);
#: not where the tag also names another platform (``-cann``, ``-npu``)
BUILD_TAG = re.compile(r"(?:^|[-_.])(?:vllm|te)\d", re.IGNORECASE)
#: prefilter words for the tags above (the rules' ``triggers``)
CUDA_TAG_WORDS = (b"-cu11", b"-cu12", b"-cu13", b"-vllm", b"-te")


#: Inference-engine images built for CUDA that have an Ascend counterpart: the image name (on
#: Docker Hub) -> the engine and the Ascend image to use. vLLM: vllm-ascend's quick start
#: (``quay.io/ascend/vllm-ascend:v<version>``, vllm-ascend X.Y.Z pairs with vLLM X.Y.Z); SGLang:
#: docs.sglang.io, "Ascend NPUs" quick start (``quay.io/ascend/sglang:main-cann8.5.0-a3``,
#: ``-910b`` for Atlas A2; stable tags ``v0.5.14-cann9.0.0-a3``).
ENGINE_IMAGES = {
    "vllm/vllm-openai": ("vLLM", ("quay.io/ascend/vllm-ascend:v<the vLLM version> (vllm-ascend's image: vLLM with "
                                  "the vllm-ascend plugin on CANN; vllm-ascend X.Y.Z pairs with vLLM X.Y.Z); the "
                                  "command line and the Python API stay the same")),
    "lmsysorg/sglang": ("SGLang", ("quay.io/ascend/sglang:<SGLang version>-cann<CANN version>-<910b for Atlas A2 | "
                                   "a3 for Atlas A3> (SGLang's Ascend NPU images, docs.sglang.io \"Ascend NPUs\"; "
                                   "main-cann<CANN>-<chip> for daily builds); check the server's flags "
                                   "(attention backend, quantization) against SGLang's Ascend documentation")),
}
#: Images that repackage vLLM's CUDA server under another organisation keep its name
#: (LMCache's ``lmcache/vllm-openai``, vLLM with LMCache built in, production-stack's default
#: serving image): any ``<org>/vllm-openai`` is read as ``vllm/vllm-openai``.
_VLLM_OPENAI = "/vllm-openai"
#: prefilter words for ENGINE_IMAGES (the rules' ``triggers``)
ENGINE_WORDS = (b"/vllm-openai", b"lmsysorg/sglang")
#: tags of those images that are not CUDA builds (ROCm, Ascend CANN, CPU, XPU, ...)
_OTHER_PLATFORM_TAG = re.compile(r"rocm|cann|npu|910b|(?:^|[-_.])a[23](?:$|[-_.])|xeon|cpu|xpu|hpu|gaudi|musa|tpu|"
                                 r"neuron|mi\d{3}", re.IGNORECASE)


def _name_and_tag(reference: str) -> tuple[str, str]:
    """``docker.io/vllm/vllm-openai:v0.9.1@sha256:...`` -> ``("vllm/vllm-openai", "v0.9.1")``."""
    base = reference.partition("@")[0]
    name, _, tag = base.rpartition(":") if ":" in base.rsplit("/", 1)[-1] else (base, "", "")
    name = name.lower()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        name = name.removeprefix(prefix)
    return name, tag


def engine_image(reference: str) -> tuple[str, str] | None:
    """``(engine, the finding's suggestion)`` when ``reference`` is a CUDA build of an inference
    engine's image (``vllm/vllm-openai:v0.9.1``, ``lmsysorg/sglang:v0.5.10.post1-runtime``); None
    for other images and for their ROCm/CANN/CPU tags (``lmsysorg/sglang:v0.5.4-rocm700-mi30x``)."""
    name, tag = _name_and_tag(reference)
    found = ENGINE_IMAGES.get(name)
    if found is None and name.endswith(_VLLM_OPENAI):
        found = ENGINE_IMAGES["vllm/vllm-openai"]
    if found is None or _OTHER_PLATFORM_TAG.search(tag):
        return None
    engine, ascend = found
    return engine, f"use {ascend}"


def cuda_image(reference: str) -> bool:
    """``nvidia/cuda:12.1.0-devel-ubuntu22.04``, ``nvcr.io/nvidia/pytorch:24.01-py3``,
    ``pytorch/pytorch:2.1.0-cuda11.8-cudnn8-runtime`` (and its ``latest``, a CUDA build),
    any image whose name or tag says ``cuda``, or whose tag names a CUDA release
    (``rayproject/ray:2.40.0-py312-cu121``) or the vLLM / Transformer Engine build it bundles
    (``verlai/verl:app-verl0.4-vllm0.8.5-mcore0.12.2-te2.2``)."""
    name, _, tag = reference.partition("@")[0].rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    name = name or reference
    if _NGC.match(name) or "cuda" in name.lower() or "cuda" in tag.lower() or CUDA_TAG.search(tag):
        return True
    if BUILD_TAG.search(tag) and not _OTHER_PLATFORM_TAG.search(tag):
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
    triggers = (b"cuda", b"nvidia", b"nvcr.io", b"pytorch/pytorch", *CUDA_TAG_WORDS, *ENGINE_WORDS)
    rationale = """
An image built `FROM nvidia/cuda`, an NGC image (`nvcr.io/nvidia/pytorch`; any image of
`nvcr.io`, `nvcr.io/nvidian/...` and `nvcr.io/nim/...` included) or
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

Inference engines' own images are CUDA builds too: `vllm/vllm-openai` (and its
repackagings under another organisation, LMCache's `lmcache/vllm-openai`) and
`lmsysorg/sglang` (its ROCm, CANN and CPU tags excepted) are reported with their
Ascend counterparts, vllm-ascend's `quay.io/ascend/vllm-ascend:v<version>` and
SGLang's `quay.io/ascend/sglang:<version>-cann<CANN>-<910b|a3>`.
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
        engine = engine_image(reference)
        if engine is not None:
            self.report(spec, f"`{reference}` is {engine[0]}'s CUDA image; it does not run on Ascend NPUs", engine[1])
        elif cuda_image(reference):
            self.report(spec, f"`{reference}` is a CUDA image; it does not run on Ascend NPUs", suggestion(reference))

    def visit_arg_instruction(self, node: Node) -> None:
        parts = node.named_children
        if len(parts) >= 2 and any(c.type == "=" for c in node.children):
            value = parts[-1]
            text = value.text.decode("utf-8", "replace").strip("\"'")
            engine = engine_image(text) if "/" in text else None
            if engine is not None:
                self.report(value, f"the default base image `{text}` is {engine[0]}'s CUDA image; it does not run on "
                            "Ascend NPUs", engine[1])
            elif "/" in text and ":" in text and cuda_image(text):
                self.report(value, f"the default base image `{text}` is a CUDA image; it does not run on Ascend NPUs",
                            suggestion(text))
