"""NPU809: NVIDIA's command-line tools other than nvidia-smi."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_PROFILER = ("profile with msprof (`msprof --application=\"python train.py\" --output=./prof`) "
             "or torch_npu.profiler in the script")
TOOLS = {
    "nsys": _PROFILER,
    "nvprof": _PROFILER,
    "ncu": "per-kernel profiling on Ascend: msprof op (`msprof op --application=...`)",
    "nv-nsight-cu-cli": "per-kernel profiling on Ascend: msprof op (`msprof op --application=...`)",
    "nvcc": "the CUDA compiler; CUDA kernels must be ported (Ascend C, or torch / torch_npu ops) - see NPU905",
    "dcgmi": "NVIDIA's datacenter GPU manager; on Ascend use npu-smi (`npu-smi info`)",
    "nvidia-docker": "on Ascend run docker with the Ascend Docker runtime (ASCEND_VISIBLE_DEVICES) or pass "
                     "--device /dev/davinci0 ... --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc",
}


#: ``docker run`` flags that take no value (the others take the next word unless written ``--x=v``)
_FLAGS = {"-i", "-t", "-it", "-ti", "-d", "--rm", "--detach", "--interactive", "--tty", "--privileged", "--init",
          "-P", "--publish-all", "--read-only", "--sig-proxy", "--no-healthcheck", "-q", "--quiet"}


def _runtime(words) -> str | None:
    """The ``--runtime`` of ``docker run`` / ``podman run``, read up to the image name."""
    texts = [w.text.strip("\"'") for w in words]
    if len(texts) < 3 or texts[1] not in ("run", "create"):
        return None
    index = 2
    while index < len(texts):
        text = texts[index]
        if not text.startswith("-"):
            return None  # the image: what follows is the container's command
        if text.startswith("--runtime="):
            return text.partition("=")[2]
        if text == "--runtime":
            return texts[index + 1] if index + 1 < len(texts) else None
        attached = not text.startswith("--") and len(text) > 2 and not set(text[1:]) <= set("itdP")  # -v/a:/b
        index += 1 if "=" in text or text in _FLAGS or attached or set(text[1:]) <= set("itdP") else 2
    return None


class ShellNvidiaTools(ShellRule):
    id = "NPU809"
    name = "shell-nvidia-tools"
    summary = ("Report NVIDIA command-line tools (nsys, ncu, nvprof, nvcc, dcgmi, nvidia-docker, `docker run --gpus`, "
               "`--runtime=nvidia`) with the Ascend counterpart")
    triggers = tuple(t.encode() for t in TOOLS) + (b"--gpus", b"--runtime")
    fixable = False
    rationale = """
Besides `nvidia-smi` (NPU805), launch scripts call NVIDIA's profilers (`nsys
profile`, `ncu`, `nvprof`), its compiler (`nvcc`), `dcgmi`, and start
containers with `nvidia-docker`, `docker run --gpus all` or `docker run
--runtime=nvidia`. None of them exists
on an Ascend machine, and none has an equivalent with the same options, so
they are reported with the tool to use: msprof for profiling, npu-smi for
device management, the Ascend Docker runtime or `--device /dev/davinciN` for
containers.
"""
    examples = (
        Example("nsys profile -t cuda,nvtx -o prof python train.py  # reported\n"),
        Example("msprof --application=\"python train.py\" --output=./prof\n"),
    )

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        if not words:
            return
        first = syntax.program(words[0])
        if first in ("sudo", "nohup", "time", "exec", "command") and len(words) > 1:
            # `sudo docker run --gpus all ...` (ROLL's docker/create_container.sh): the
            # wrapper's own options come first (`sudo -E`), then the program
            index = next((i for i, w in enumerate(words[1:], 1) if not w.text.startswith("-")), None)
            if index is not None and syntax.program(words[index]) in (*TOOLS, "docker", "podman"):
                words = words[index:]
                first = syntax.program(words[0])
        if first in TOOLS:
            self.report(node, f"`{first}` is an NVIDIA tool; Ascend machines do not have it", TOOLS[first])
        elif first in ("docker", "podman") and any(w.text == "--gpus" or w.text.startswith("--gpus=") for w in words):
            self.report(node, "`--gpus` asks the NVIDIA container runtime for GPUs", TOOLS["nvidia-docker"])
        elif first in ("docker", "podman") and _runtime(words) == "nvidia":
            self.report(node, "`--runtime=nvidia` starts the container on the NVIDIA container runtime",
                        TOOLS["nvidia-docker"])
