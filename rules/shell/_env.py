"""Shared by NPU801 and NPU802: where a script names an environment variable.

A variable is named, and renamed, wherever the shell treats it as one: an
assignment (``X=1``, ``export X=1``, ``declare -x X``, ``local X``), ``unset X``,
every expansion (``$X``, ``${X}``, ``${X:-1}``, ``${#X}``, ``$((X + 1))``, in strings
and heredocs too), the ``X=1`` prefix of a command, ``env X=1 cmd``,
``env -u X``, ``printenv X``, ``mpirun -x X=1``, ``docker run -e X=1`` / ``--env X``,
``[[ -v X ]]``. The same word in prose (``echo "set CUDA_VISIBLE_DEVICES first"``,
comments, quoted heredocs) is not a variable and stays.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, ClassVar

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule
from npu_migrate.tables.env_vars import IFNAME_ADVICE, advice, ascend_name, file_text, pinned_interface
from npu_migrate.tables.nvidia_platform import nvidia_platform

if TYPE_CHECKING:
    from tree_sitter import Node

_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
#: Options after which a word is ``NAME`` or ``NAME=value`` of the launched process.
_ENV_OPTIONS = {
    "mpirun": {"-x"}, "mpiexec": {"-x", "-genv", "-env"}, "docker": {"-e", "--env"}, "podman": {"-e", "--env"},
    "singularity": {"--env"}, "apptainer": {"--env"}, "env": {"-u", "--unset"},
}


def env_word_name(word: Node) -> tuple[bytes, int] | None:
    """``(NAME, offset)`` when ``word`` (an argument) names a variable of the process a
    command starts: ``env NAME=1``, ``mpirun -x NAME``, ``printenv NAME``..."""
    command = word.parent
    if command is None or word.type != "word":
        return None
    if command.type == "unary_expression":  # [[ -v NAME ]]
        operator = command.child(0)
        if operator is not None and operator.text == b"-v":
            return _name_at(word.text, word.start_byte, whole=True)
        return None
    if command.type != "command":
        return None
    words = syntax.command_args(command)
    if not words or words[0].node == word:
        return None
    program = syntax.program(words[0])
    index = next((i for i, w in enumerate(words) if w.node == word), None)
    if index is None:
        return None
    text = word.text
    if program == "printenv":
        return _name_at(text, word.start_byte, whole=True)
    previous = words[index - 1].text
    options = _ENV_OPTIONS.get(program, set())
    if previous in options:
        return _name_at(text, word.start_byte)
    for option in options:
        if option.startswith("--") and text.startswith(option.encode() + b"="):
            return _name_at(text[len(option) + 1 :], word.start_byte + len(option) + 1)
    if program == "env" and b"=" in text and all(b"=" in w.text.encode() or w.text.startswith("-")
                                                 for w in words[1:index]):
        return _name_at(text, word.start_byte)
    return None


def _name_at(text: bytes, offset: int, whole: bool = False) -> tuple[bytes, int] | None:
    match = _NAME.match(text)
    if match is None or (whole and match.end() != len(text)) or (not whole and text[match.end():match.end() + 1] not in (b"", b"=")):
        return None
    return match.group(), offset


#: a script that configures an NVIDIA-specific network stack: Google Cloud's GPUDirect-TCPX(O)
#: ("FasTrak"), an NCCL net/tuner/shim plugin (OLMo's scripts/augusta/*.sh). Its NCCL and
#: CUDA variables carry that platform's values (`NCCL_SOCKET_IFNAME=enp0s12`, the VM's
#: control NIC), which renaming to HCCL's names would pin on another machine.
_NETWORK_PROFILE = re.compile(
    rb"\b(NCCL_FASTRAK_\w+|NCCL_GPUDIRECTTCPX\w*|NCCL_NET_PLUGIN|NCCL_TUNER_PLUGIN|NCCL_SHIMNET_\w+|"
    rb"/tcpxo?/|libnccl-net[\w.-]*)")


@functools.lru_cache(maxsize=16)
def _network_profile(data: bytes) -> str | None:
    # (cached: a Dockerfile hands every RUN line's rules the whole file; a bytes object
    # keeps its hash, so a repeated lookup costs no rescan)
    found = _NETWORK_PROFILE.search(data)
    return found.group(1).decode("ascii", "replace") if found is not None else None


@functools.lru_cache(maxsize=16)
def _nvidia_serving(data: bytes) -> str | None:
    """The first NVIDIA-only serving tool the script runs (cached like :func:`_network_profile`)."""
    found = _NVIDIA_SERVING.search(data)
    return found.group(1).decode("ascii") if found is not None else None


#: A command that runs JAX or TensorFlow code (cleanrl's ``CUDA_VISIBLE_DEVICES=-1 ... --command
#: "uv run python cleanrl/c51_jax.py"``, ``python train_tf.py``, ``python -m jax...``).
_OTHER_FRAMEWORK = re.compile(rb"(?<![A-Za-z0-9])(jax|flax|tensorflow|keras)(?![A-Za-z0-9])|_(jax|tf)\.py\b",
                              re.IGNORECASE)


#: NVIDIA-only serving and engine tools that read the CUDA visibility variables themselves:
#: a script that runs them is an NVIDIA deployment (F5-TTS's runtime/triton_trtllm/run.sh,
#: held-out round 19: its `export CUDA_VISIBLE_DEVICES=0` pins GPU 0 for trtllm-build and
#: tritonserver)
_NVIDIA_SERVING = re.compile(rb"^[^#\n]*?(?<![\w./-])(trtllm-build|tritonserver|trtexec|perf_analyzer|genai-perf)(?![\w-])",
                             re.MULTILINE)


def _other_framework(node: Node) -> str | None:
    """The framework named by the command ``node`` belongs to (a ``VAR=... cmd`` prefix or
    ``env VAR=... cmd``), when it is JAX or TensorFlow; None otherwise (an ``export`` line
    applies to the whole script: not decided here)."""
    current = node
    while current is not None and current.type not in ("command", "program", "export_command", "declaration_command"):
        current = current.parent
    if current is None or current.type != "command":
        return None
    found = _OTHER_FRAMEWORK.search(current.text)
    if found is None:
        return None
    word = (found.group(1) or found.group(2)).decode("ascii").lower()
    return {"tf": "TensorFlow", "tensorflow": "TensorFlow", "keras": "TensorFlow", "flax": "JAX"}.get(word, "JAX")


#: ``num_gpus=$(nvidia-smi -L | wc -l)``, ``echo "GPUs: $(rocm-smi)"``: the script asks the
#: machine it runs on for its GPUs (a command substitution of an NVIDIA or AMD GPU tool)
_GPU_QUERY = re.compile(rb"(?:\$\(|`)[ \t]*(nvidia-smi|rocm-smi|amd-smi)\b")
#: the variables ROCm's runtime reads: a script that sets or echoes them is for AMD GPUs
_ROCM_VARIABLE = re.compile(rb"\b(ROCR_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES)\b")


@functools.lru_cache(maxsize=16)
def _machine_gpus(data: bytes) -> tuple[str, str, int] | None:
    """``(evidence, vendor, line)`` where the script reads the GPUs of the machine it runs on
    (``num_gpus=$(nvidia-smi -L | wc -l)``, ``echo "$(nvidia-smi -L)"``, ``TORCH_CUDA_ARCH_LIST=$(nvidia-smi
    --query-gpu=compute_cap ...)``) or names ROCm's device variables: a script that asks
    for that machine's GPUs is that machine's. wenet's recipes build `CUDA_VISIBLE_DEVICES`
    from it, with a `-1` fallback that `ASCEND_RT_VISIBLE_DEVICES` reads as "no NPU"
    (held-out round 24); ArcticTraining's weekly benchmarks build the CUDA architecture list
    from it, and their renamed `PYTORCH_CUDA_ALLOC_CONF` dropped the allocator setting there
    (round 25); oumi's job scripts for the Polaris and Perlmutter A100 nodes log
    `$(nvidia-smi -L)`, and its Frontier script (AMD MI250X) logs `$(rocm-smi)` and
    `ROCR_VISIBLE_DEVICES` (round 25). None otherwise."""
    found = _GPU_QUERY.search(data) or _ROCM_VARIABLE.search(data)
    if found is None:
        return None
    tool = found.group(1).decode("ascii")
    vendor = "NVIDIA" if tool == "nvidia-smi" else "AMD"
    evidence = f"`{tool}`" if tool.endswith("smi") else f"ROCm's `{tool}`"
    return evidence, vendor, data.count(b"\n", 0, found.start()) + 1


class EnvVarRule(ShellRule):
    """Rename the variables of :meth:`concerns` that have an Ascend counterpart
    (``npu_migrate/tables/env_vars.py``); report the others once per line."""

    what: ClassVar[str]  # "CUDA" or "NCCL", for messages

    @classmethod
    def concerns(cls, name: str) -> bool:
        raise NotImplementedError

    def __init__(self, file) -> None:
        super().__init__(file)
        self.env_vars = load_api().env_vars
        self.reported: set[tuple[int, str]] = set()

    def visit_variable_name(self, node: Node) -> None:
        self._handle(node.text, node.start_byte, node)

    def visit_word(self, node: Node) -> None:
        found = env_word_name(node)
        if found is not None:
            self._handle(found[0], found[1], node)

    def _handle(self, raw: bytes, offset: int, node: Node) -> None:
        name = raw.decode("ascii", "replace")
        if not self.concerns(name):
            return
        new = ascend_name(name, self.env_vars)
        if new is not None and (profile := _network_profile(self.file.data)) is not None:
            self._report_once(node, name, f"`{name}` is set by this script's NVIDIA network profile (`{profile}`: "
                                          "GPUDirect-TCPX(O)/FasTrak, an NCCL net or tuner plugin); its values are "
                                          "that platform's (NIC names, GPU sets); left unchanged",
                              f"on Ascend set `{new}` to the Ascend nodes' own values, in a profile of their own")
            return
        if new is not None and pinned_interface(name, file_text(self.file.data)):
            self._report_once(node, name, f"`{name}` is set to a literal naming this cluster's network interfaces; "
                                          "left unchanged", IFNAME_ADVICE)
            return
        platform = nvidia_platform(self.file.data) if new is not None else None
        if platform is not None:
            sign, line = platform
            self._report_once(node, name, f"`{name}` is set in a file that runs on NVIDIA's platform ({sign}, line "
                                          f"{line}): it is that platform's until the file is ported; left unchanged",
                              f"port the platform first (an Ascend image, NPU resources), then set `{new}` in "
                              "its place, or run npu-migrate again")
            return
        machine = _machine_gpus(self.file.data) if new is not None else None
        if machine is not None:
            evidence, vendor, line = machine
            self._report_once(node, name, f"`{name}` is set in a script that reads the {vendor} GPUs of the machine it "
                                          f"runs on ({evidence}, line {line}): the script is for {vendor} machines (on "
                                          "an Ascend host that tool is missing, and a fallback such as `-1` in a "
                                          "device list would hide every NPU); left unchanged",
                              f"read the NPUs another way (`npu-smi info -l`, or torch.npu.device_count()) and set "
                              f"`{new}` from that, then rename every use of `{name}` in this script together")
            return
        tool = _nvidia_serving(self.file.data) if new is not None else None
        if tool is not None:
            self._report_once(node, name, f"`{name}` is set in a script that runs `{tool}`, an NVIDIA-only tool that "
                                          "reads it; left unchanged",
                              "nothing to do for that deployment on NVIDIA GPUs; an Ascend deployment of the model "
                              "is a script of its own (MindIE or vllm-ascend instead of TensorRT/Triton)")
            return
        other = _other_framework(node) if new is not None else None
        if other is not None:
            self._report_once(node, name, f"`{name}` is set for a command that runs {other}, not torch: that "
                                          "framework reads it on NVIDIA GPUs and knows no Ascend variable; left unchanged",
                              "nothing to do for the torch jobs; run that framework's job where its GPUs are, or "
                              "port it (JAX and TensorFlow have no torch_npu)")
            return
        if new is not None:
            self.replace(offset, offset + len(raw), new, f"`{name}` -> `{new}`")
            return
        self._report_once(node, name, f"`{name}` has no effect on Ascend", advice(name))

    def _report_once(self, node: Node, name: str, message: str, suggestion: str) -> None:
        """One finding per variable and line (a name written twice on a line is one report)."""
        key = (node.start_point.row, name)
        if key not in self.reported:
            self.reported.add(key)
            self.report(node, message, suggestion)
