"""NPU963: CUDA images named in docker-compose files and devcontainer.json."""

from __future__ import annotations

import os
import re

from npu_migrate.rules.dockerfile.npu821_cuda_base_image import (
    CUDA_TAG_WORDS,
    ENGINE_WORDS,
    cuda_image,
    engine_image,
    suggestion,
)

from npu_migrate.configs.rule import ConfigRule, Example

#: the keys of a Kubernetes pod spec that list containers (``spec.template.spec.containers``)
_POD_CONTAINERS = frozenset({"containers", "initContainers"})
#: a Helm chart's values file by its name (``values.yaml``, ``values-01-minimal-example.yaml``,
#: ``prod.values.yaml``): charts read their images from it (``image: {repository:, tag:}``)
_VALUES_FILE = re.compile(r"(?:[\w.-]*[._-])?values(?:[._-][\w.-]*)?\.ya?ml", re.IGNORECASE)


def _image_reference(value: str) -> bool:
    """A container image reference as written: a name with a registry or organisation,
    lower case (Docker's reference grammar), so ``NVIDIA/Megatron-LM`` (a GitHub
    repository) is not one."""
    name = value.partition("@")[0].rsplit(":", 1)[0] if ":" in value.rsplit("/", 1)[-1] else value
    return "/" in name and name == name.lower() and " " not in value


class ContainerCudaImage(ConfigRule):
    id = "NPU963"
    impact = "blocking"
    name = "container-cuda-image"
    fixable = False
    summary = ("Report CUDA images (`nvcr.io/...`, `nvidia/cuda`, `pytorch/pytorch`, vLLM's and SGLang's) in compose "
               "services, devcontainer.json, Kubernetes pod templates and Helm values (`repository`/`image`)")
    triggers = (b"cuda", b"nvidia", b"nvcr.io", b"pytorch/pytorch", *CUDA_TAG_WORDS, *ENGINE_WORDS)
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

Helm values (issue 36): a chart names its image as `repository` (and `tag`) keys,
often under `image:` (`image: {repository: nvcr.io/nvidia/pytorch, tag: 24.01-py3}`),
sometimes in a list of models (vLLM production-stack's `modelSpec: [{repository:
"lmcache/vllm-openai", tag: "latest"}]`). A `repository` value is read as an image when
it is under `image`, or when it is an inference engine's CUDA image or an `nvcr.io`
image wherever it sits (a `repository: NVIDIA/Megatron-LM` naming a git repository is
not an image: references are lower case). In a file named as a values file
(`values.yaml`, `values-*.yaml`, `*.values.yaml`) every `image` key is read; elsewhere
an `image` key outside a pod's container list is not (another tool's field).
"""
    examples = (
        Example("services:\n  train:\n    image: nvcr.io/nvidia/pytorch:24.01-py3  # reported\n"),
        Example("services:\n  web:\n    image: nginx:1.25\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._repository = None  # the last `repository` read, until its `tag`
        self._pending: list = []  # Helm `repository` values to report at the end of the file

    def visit_scalar(self, scalar) -> None:
        keys = scalar.keys
        if scalar.is_key:
            if len(keys) == 2 and keys[0] == "features" and "nvidia-cuda" in keys[1]:
                self.report(scalar, f"devcontainer feature `{keys[1]}` installs CUDA",
                            "drop it and start from Ascend's CANN image (see NPU821)")
            return
        if keys and keys[-1] == "tag" and self._repository is not None and self._repository.keys[:-1] == keys[:-1]:
            # the tag of the repository just read (`repository: lmsysorg/sglang` then `tag: v0.5.4-rocm700-mi30x`)
            repository, self._repository = self._repository, None
            if engine_image(f"{repository.value}:{scalar.value}") is None and \
                    not cuda_image(f"{repository.value}:{scalar.value}"):
                self._pending.remove(repository)
            return
        if keys and keys[-1] == "repository" and self._helm_image(keys, scalar.value):
            self._repository = scalar
            self._pending.append(scalar)  # reported once its `tag` (if any, next) is read
            return
        image = ((len(keys) == 3 and keys[0] == "services" and keys[2] == "image") or keys == ("image",)
                 or (len(keys) >= 2 and keys[-1] == "image" and keys[-2] in _POD_CONTAINERS)
                 or self._helm_image(keys, scalar.value))
        self._check(scalar, image)

    def leave_file(self) -> None:
        for scalar in self._pending:
            self._check(scalar, True)

    def _check(self, scalar, image: bool) -> None:
        engine = engine_image(scalar.value) if image else None
        if engine is not None:
            self.report(scalar, f"image `{scalar.value}` is {engine[0]}'s CUDA image", engine[1])
        elif image and cuda_image(scalar.value):
            self.report(scalar, f"image `{scalar.value}` is a CUDA image", suggestion(scalar.value).replace("FROM ", "use ", 1))

    def _helm_image(self, keys: tuple[str, ...], value: str) -> bool:
        """An image a Helm chart's values name (see the rationale)."""
        if not keys or not _image_reference(value):
            return False
        if keys[-1] == "repository":
            return (len(keys) >= 2 and keys[-2] == "image") or engine_image(value) is not None \
                or value.lower().startswith("nvcr.io/")
        return keys[-1] == "image" and bool(_VALUES_FILE.fullmatch(os.path.basename(self.file.path or "")))
