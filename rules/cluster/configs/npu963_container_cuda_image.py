"""NPU963: CUDA images named in docker-compose files and devcontainer.json."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.dockerfile.npu821_cuda_base_image import (
    CUDA_TAG_WORDS,
    ENGINE_WORDS,
    cuda_image,
    engine_image,
    suggestion,
)


#: the keys of a Kubernetes pod spec that list containers (``spec.template.spec.containers``)
_POD_CONTAINERS = frozenset({"containers", "initContainers"})


class ContainerCudaImage(ConfigRule):
    id = "NPU963"
    impact = "blocking"
    name = "container-cuda-image"
    fixable = False
    summary = ("Report CUDA images (`nvcr.io/...`, `nvidia/cuda`, `pytorch/pytorch`, vLLM's and SGLang's) in compose "
               "services, devcontainer.json and Kubernetes pod templates")
    triggers = (b"cuda", b"nvidia", b"pytorch/pytorch", *CUDA_TAG_WORDS, *ENGINE_WORDS)
    rationale = """
NPU821 reports a Dockerfile's CUDA base image; a docker-compose service
(`services.<name>.image`) and a devcontainer.json (`"image"`) name images too, and
an NGC image (`nvcr.io/nvidia/pytorch:24.01-py3`), `nvidia/cuda` or
`pytorch/pytorch` holds the CUDA runtime and a CUDA build of torch. Reported with
the same route as NPU821 (Ascend's CANN image, torch and torch-npu paired on top);
a devcontainer's `features` that install CUDA
(`ghcr.io/devcontainers/features/nvidia-cuda`) are reported too. A Kubernetes pod
template's `containers[].image` / `initContainers[].image` (a Deployment, a Job, a
Pod, a RayCluster's groups) is read the same way. The CUDA images of inference
engines (`vllm/vllm-openai`, `lmsysorg/sglang`) are reported with their Ascend
images, as in NPU821.
"""
    examples = (
        Example("services:\n  train:\n    image: nvcr.io/nvidia/pytorch:24.01-py3  # reported\n"),
        Example("services:\n  web:\n    image: nginx:1.25\n"),
    )

    def visit_scalar(self, scalar) -> None:
        keys = scalar.keys
        if scalar.is_key:
            if len(keys) == 2 and keys[0] == "features" and "nvidia-cuda" in keys[1]:
                self.report(scalar, f"devcontainer feature `{keys[1]}` installs CUDA",
                            "drop it and start from Ascend's CANN image (see NPU821)")
            return
        image = ((len(keys) == 3 and keys[0] == "services" and keys[2] == "image") or keys == ("image",)
                 or (len(keys) >= 2 and keys[-1] == "image" and keys[-2] in _POD_CONTAINERS))
        engine = engine_image(scalar.value) if image else None
        if engine is not None:
            self.report(scalar, f"image `{scalar.value}` is {engine[0]}'s CUDA image", engine[1])
        elif image and cuda_image(scalar.value):
            self.report(scalar, f"image `{scalar.value}` is a CUDA image", suggestion(scalar.value).replace("FROM ", "use ", 1))
