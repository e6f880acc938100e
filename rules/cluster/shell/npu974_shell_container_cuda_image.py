"""NPU974: CUDA images started by launch scripts (``docker run``, ``srun --container-image``, ``docker://``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.rules.dockerfile.npu821_cuda_base_image import (
    CUDA_TAG_WORDS,
    ENGINE_WORDS,
    cuda_image,
    engine_image,
    suggestion,
)
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

#: ``docker run`` flags that take no value (the others take the next word unless written ``--x=v``)
_FLAGS = {"-i", "-t", "-it", "-ti", "-d", "--rm", "--detach", "--interactive", "--tty", "--privileged", "--init",
          "-P", "--publish-all", "--read-only", "--sig-proxy", "--no-healthcheck", "-q", "--quiet"}
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_CONTAINER_IMAGE = ("--container-image",)  # Slurm's pyxis plugin (srun, sbatch, salloc)


def _docker_image(words: list[syntax.Arg]) -> syntax.Arg | None:
    """The image word of ``docker|podman run|create [options] IMAGE [command...]``."""
    if len(words) < 3 or words[1].text not in ("run", "create"):
        return None
    index = 2
    while index < len(words):
        text = words[index].text.strip("\"'")
        if not text.startswith("-"):
            return words[index]
        attached = not text.startswith("--") and len(text) > 2 and not set(text[1:]) <= set("itdP")  # -v/a:/b
        index += 1 if "=" in text or text in _FLAGS or attached or set(text[1:]) <= set("itdP") else 2
    return None


def _images(words: list[syntax.Arg]) -> list[syntax.Arg]:
    """The words of a command that name an image to run."""
    if not words:
        return []
    first = syntax.program(words[0])
    found = []
    if first in ("docker", "podman", "nerdctl"):
        image = _docker_image(words)
        if image is not None:
            found.append(image)
    for index, word in enumerate(words):
        text = word.text
        name, equals, _ = text.partition("=")
        if name in _CONTAINER_IMAGE:
            if equals:
                found.append(word.after(len(name) + 1))
            elif index + 1 < len(words):
                found.append(words[index + 1])
        elif first in ("singularity", "apptainer", "enroot") and text.strip("\"'").startswith("docker://"):
            found.append(word)
    return found


def _reference(text: str) -> str:
    """``nvcr.io/nvidia/pytorch:24.01-py3`` for ``docker://nvcr.io/...`` or pyxis' ``nvcr.io#nvidia/pytorch``."""
    text = text.strip("\"'")
    text = text.removeprefix("docker://")
    return text.replace("#", "/", 1)


def _runs_cuda(reference: str) -> bool:
    return engine_image(reference) is not None or cuda_image(reference)


class ShellContainerCudaImage(ShellRule):
    id = "NPU974"
    name = "shell-container-cuda-image"
    impact = "blocking"
    fixable = False
    summary = ("Report CUDA images that launch scripts run (`docker run nvcr.io/...`, `srun --container-image`, "
               "`singularity ... docker://`), also through a variable (`IMAGE=nvcr.io/...`)")
    triggers = (b"cuda", b"nvcr.io", b"nvidia/", b"pytorch/pytorch", *CUDA_TAG_WORDS, *ENGINE_WORDS)
    rationale = """
NPU821 reports a Dockerfile's CUDA base image and NPU963 the images of compose
files and devcontainers; launch scripts start containers too: `docker run ... IMAGE`
(`podman`, `nerdctl`), Slurm's pyxis `srun --container-image=IMAGE`, `singularity
exec docker://IMAGE`, `enroot import docker://IMAGE`. An NGC image
(`nvcr.io/nvidia/pytorch:24.01-py3`, pyxis' `nvcr.io#nvidia/pytorch`), `nvidia/cuda`
or `pytorch/pytorch` holds the CUDA runtime and a CUDA build of torch (NPU821's
table). The image is read where the command names it, or, for `$IMAGE` /
`"${IMAGE}"`, from the literal values assigned to that variable in the script,
where each is reported. Route: the CANN image with torch and torch-npu paired on top,
as NPU821 says; NPU809 reports the `--gpus` / `--runtime=nvidia` of the same command.
The CUDA images of inference engines (`vllm/vllm-openai`, `lmsysorg/sglang`) are
reported with their Ascend images, as in NPU821.
"""
    examples = (
        Example('IMAGE="nvcr.io/nvidia/pytorch:24.01-py3"  # reported\ndocker run --rm -v $PWD:/w "$IMAGE" bash\n'),
        Example("srun --container-image=nvcr.io#nvidia/pytorch:24.01-py3 python train.py  # reported\n"),
        Example('IMAGE="ubuntu:22.04"\ndocker run --rm "$IMAGE" echo nvcr.io/nvidia/pytorch:24.01-py3\n'),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self.assigned: dict[str, list[Node]] = {}
        self.used: set[str] = set()

    def visit_variable_assignment(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is not None and value is not None:
            self.assigned.setdefault(name.text.decode("utf-8", "replace"), []).append(value)

    def visit_command(self, node: Node) -> None:
        for word in _images(syntax.command_args(node)):
            text = word.text.strip("\"'")
            variable = _VARIABLE.fullmatch(text)
            if variable is not None:
                self.used.add(variable.group(1))
            elif word.static and _runs_cuda(_reference(text)):
                self._report(node, _reference(text), word.pieces[0].start if word.pieces else None)

    def leave_file(self) -> None:
        for name in sorted(self.used):
            for value in self.assigned.get(name, ()):
                word = syntax.arg(value)
                if word.static and _runs_cuda(_reference(word.text)):
                    self._report(value, _reference(word.text), None, f" (run through `${name}`)")

    def _report(self, node: Node, image: str, offset: int | None, where: str = "") -> None:
        engine = engine_image(image)
        if engine is not None:
            self.report(node, f"image `{image}` is {engine[0]}'s CUDA image{where}", engine[1], offset=offset)
            return
        self.report(node, f"image `{image}` is a CUDA image{where}", suggestion(image).replace("FROM ", "use ", 1),
                    offset=offset)
