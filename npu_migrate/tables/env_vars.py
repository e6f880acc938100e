"""Environment variables with a CUDA/NCCL meaning and what they become on Ascend.

Sources: the CANN environment-variable reference and torch_npu 2.13 (the
``env_vars`` list of ``npu_migrate/data/torch_npu_api.json`` holds every variable
libtorch_npu reads). See ../shared/NOTES.md, "Environment variables with an
Ascend counterpart".

A plain data module: the Python rules (NPU106 for CUDA variables, NPU203 for
NCCL ones) and the other front ends (shell scripts) read the same tables through
:func:`ascend_name` and :func:`advice`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

#: Variables whose Ascend counterpart has the same meaning and value format.
#: The first three NCCL ones are ProcessGroup watchdog switches that torch_npu
#: reads under both spellings (libtorch_npu.so literals); HCCL_SOCKET_IFNAME is
#: read by HCCL itself (CANN environment-variable reference), not by torch_npu.
SAME_MEANING = {
    "CUDA_VISIBLE_DEVICES": "ASCEND_RT_VISIBLE_DEVICES",
    "NCCL_ASYNC_ERROR_HANDLING": "HCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT": "HCCL_BLOCKING_WAIT",
    "NCCL_DESYNC_DEBUG": "HCCL_DESYNC_DEBUG",
    "NCCL_SOCKET_IFNAME": "HCCL_SOCKET_IFNAME",
    # CANN: 1 = synchronous kernel launches (slower; disables the task queue), as on CUDA.
    "CUDA_LAUNCH_BLOCKING": "ASCEND_LAUNCH_BLOCKING",
    # torch_npu's caching allocator reads the same option syntax (expandable_segments:True,
    # max_split_size_mb:N, garbage_collection_threshold:X).
    "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_NPU_ALLOC_CONF",
}

#: NCCL variables with no drop-in counterpart: what to do instead.
ADVICE = {
    "NCCL_DEBUG": (
        "HCCL has no NCCL_DEBUG; CANN logging is set with ASCEND_GLOBAL_LOG_LEVEL "
        "(0 debug, 1 info, 2 warning, 3 error), which covers all of CANN, not only collectives"
    ),
    "NCCL_DEBUG_SUBSYS": "no HCCL counterpart; use ASCEND_GLOBAL_LOG_LEVEL for CANN logs",
    "NCCL_DEBUG_FILE": "no HCCL counterpart; CANN writes its logs under ~/ascend/log",
    "NCCL_BUFFSIZE": "use HCCL_BUFFSIZE, but its unit is megabytes (default 200) while NCCL_BUFFSIZE is in bytes: convert the value",
    "NCCL_ALGO": "HCCL_ALGO exists but takes a different syntax (per level, e.g. 'level0:NA;level1:ring'); set it by hand or drop it",
    "NCCL_IB_TC": "the closest is HCCL_RDMA_TC (RDMA traffic class); check the value range in the CANN docs before setting it",
    "NCCL_IB_SL": "the closest is HCCL_RDMA_SL (RDMA service level); check the value range in the CANN docs before setting it",
    "NCCL_TIMEOUT": "HCCL uses HCCL_CONNECT_TIMEOUT (link setup, default 120 s) and HCCL_EXEC_TIMEOUT (per collective, default 1836 s)",
    "NCCL_IB_TIMEOUT": "HCCL uses HCCL_CONNECT_TIMEOUT and HCCL_EXEC_TIMEOUT (seconds); NCCL_IB_TIMEOUT is an exponent, do not copy its value",
    "CUDA_DEVICE_MAX_CONNECTIONS": (
        "no documented CANN counterpart; Megatron-LM asserts on it for sequence parallelism, and Ascend's "
        "Megatron adapter (MindSpeed) handles it: keep it only if the Megatron code you run still checks it"
    ),
    "CUDA_HOME": "the CUDA toolkit location; CANN's is set by `source /usr/local/Ascend/ascend-toolkit/set_env.sh` (ASCEND_HOME_PATH)",
    "CUDA_PATH": "the CUDA toolkit location; CANN's is set by `source /usr/local/Ascend/ascend-toolkit/set_env.sh` (ASCEND_HOME_PATH)",
    "CUDA_DEVICE_ORDER": "no counterpart: NPUs are numbered by their physical id (see `npu-smi info`); remove it",
    "NVIDIA_VISIBLE_DEVICES": (
        "the NVIDIA container runtime's device list; the Ascend Docker runtime reads ASCEND_VISIBLE_DEVICES "
        "(device ids such as 0,1 or 0-3), which mounts the NPUs into the container"
    ),
    "TORCH_CUDA_ARCH_LIST": "the GPU architectures CUDA extensions are built for; CUDA extensions do not build for Ascend (see NPU905)",
    "FORCE_CUDA": (
        "makes `pip install`/`setup.py` build the package's CUDA ops (mmcv, detectron2...); mmcv's Ascend build "
        "is MMCV_WITH_OPS=1 FORCE_NPU=1, most other packages have no NPU ops to build: drop it"
    ),
}

#: Advice for an NCCL variable that is in neither table.
GENERIC_NCCL = "no HCCL counterpart in torch_npu 2.13; remove it, or look up the HCCL setting in the CANN environment-variable reference"


#: Advice for a CUDA/NVIDIA variable that is in neither table.
GENERIC_CUDA = "a CUDA/NVIDIA setting that Ascend ignores; remove it, or look up the CANN setting in the CANN environment-variable reference"

_CUDA_PREFIXES = ("CUDA_", "PYTORCH_CUDA_", "TORCH_CUDA_", "NVIDIA_", "CUDNN_")
_CUDA_NAMES = frozenset({"FORCE_CUDA"})
_NCCL_PREFIXES = ("NCCL_", "TORCH_NCCL_")


def is_cuda_variable(name: str) -> bool:
    """A CUDA/NVIDIA runtime variable (``CUDA_VISIBLE_DEVICES``, ``PYTORCH_CUDA_ALLOC_CONF``...)."""
    return name.startswith(_CUDA_PREFIXES) or name in _CUDA_NAMES


def is_nccl_variable(name: str) -> bool:
    return name.startswith(_NCCL_PREFIXES)


#: CUDA variables with an Ascend counterpart of the same meaning and value format.
CUDA_SAME_MEANING = {name: new for name, new in SAME_MEANING.items() if is_cuda_variable(name)}
#: Every CUDA/NVIDIA variable the tables know: renamed (above) or reported (ADVICE).
CUDA_VARIABLES = tuple(name for name in (*SAME_MEANING, *ADVICE) if is_cuda_variable(name))


def ascend_name(name: str, torch_npu_env_vars: Collection[str]) -> str | None:
    """The Ascend variable that means the same as ``name``, if there is one.
    ``TORCH_NCCL_X`` maps to ``TORCH_HCCL_X`` when torch_npu reads that name."""
    if name.startswith("TORCH_NCCL_"):
        candidate = "TORCH_HCCL_" + name[len("TORCH_NCCL_") :]
        return candidate if candidate in torch_npu_env_vars else None
    return SAME_MEANING.get(name)


def advice(name: str) -> str:
    """What to do about a variable that has no Ascend counterpart."""
    return ADVICE.get(name, GENERIC_CUDA if is_cuda_variable(name) else GENERIC_NCCL)


#: Variables whose value names network interfaces of the machines a script was written for.
#: ``NCCL_SOCKET_IFNAME=eth0`` (or ``ib``, ``bond0``, ``=enp0s12``) names the NVIDIA cluster's
#: NICs: carried over as ``HCCL_SOCKET_IFNAME=eth0`` it is a guess about the Ascend hosts, and
#: HCCL fails at init where that interface does not exist (left alone, HCCL picks its default
#: NIC). Such a variable is renamed only when its value is portable (:func:`portable_ifname`).
INTERFACE_VARIABLES = frozenset({"NCCL_SOCKET_IFNAME"})

_VALUE = r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;&|)}\]#]*)"""
_IFNAME_VALUES = (
    # NAME=value, NAME: value, "NAME": "value", ["NAME"] = "value", ("NAME", "value"), NAME="value"
    re.compile(r"""NCCL_SOCKET_IFNAME["']?\]?[ \t]*[:=,][ \t]*(?!["']?value["']?[ \t]*[:=])""" + _VALUE),
    # {"name": "NCCL_SOCKET_IFNAME", "value": "ib"}; k8s `- name: NCCL_SOCKET_IFNAME` + `value: eth0`
    re.compile(r"""NCCL_SOCKET_IFNAME["']?[ \t]*(?:#[^\n]*)?(?:,|\n)[ \t]*["']?value["']?[ \t]*[:=][ \t]*""" + _VALUE),
    # %env NAME value, Dockerfile `ENV NAME value`
    re.compile(r"""(?:%(?:set_)?env|^[ \t]*ENV)[ \t]+NCCL_SOCKET_IFNAME[ \t]+""" + _VALUE, re.MULTILINE),
)
IFNAME_ADVICE = (
    "on Ascend, HCCL_SOCKET_IFNAME must name the Ascend hosts' own NIC (or be an exclusion list such as "
    "`^lo,docker0`); set it by hand, or leave it unset and HCCL picks its default NIC"
)


def portable_ifname(value: str, *, python: bool = False) -> bool:
    """Whether an interface value (:data:`INTERFACE_VARIABLES`) means the same on any machine.

    Portable: an exclusion list (``^lo,docker0``: any interface but these), a value taken
    from the environment or a variable (``$IFNAME``, ``${X:-eth0}``, ``$(cmd)``, a template
    ``{{ .Values.ifname }}``; in Python any expression that is not a string literal), or
    an empty value. Not portable: a literal naming interfaces (``eth0``, ``ib``,
    ``bond0,eth1``, ``=enp0s12``). With ``python``, ``value`` is source text: an
    unquoted value is a name or expression, not a literal."""
    text = value.strip()
    quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'"
    if python and not quoted:
        return True
    if quoted:
        text = text[1:-1].strip()
    return text == "" or text.startswith("^") or any(mark in text for mark in ("$", "`", "{"))


@functools.lru_cache(maxsize=16)
def ifname_literals(text: str, *, python: bool = False) -> tuple[str, ...]:
    """The values that a file's text gives an interface variable and that are not portable
    (:func:`portable_ifname`): where this returns any, the front ends leave the variable's
    name alone everywhere in the file (its reads and writes must keep agreeing) and report
    it with :data:`IFNAME_ADVICE`. A textual scan, so a value written in a comment counts
    too: that errs toward leaving the line as it is."""
    # (cached: a rule asks once per mention, with the same text object, whose hash
    # Python keeps; a Dockerfile's RUN lines all see the whole file)
    if "NCCL_SOCKET_IFNAME" not in text:
        return ()
    found = []
    for pattern in _IFNAME_VALUES:
        for match in pattern.finditer(text):
            value = match.group("value")
            if not portable_ifname(value, python=python):
                found.append(value)
    return tuple(found)


@functools.lru_cache(maxsize=16)
def file_text(data: bytes) -> str:
    """A file's bytes as the text :func:`pinned_interface` reads (cached: one decode per file)."""
    return data.decode("utf-8", "replace")


def pinned_interface(name: str, text: str, *, python: bool = False) -> bool:
    """``name`` is an interface variable that ``text`` (the whole file) sets to a literal
    naming this cluster's NICs: leave ``name`` unrenamed in that file and report it."""
    return name in INTERFACE_VARIABLES and bool(ifname_literals(text, python=python))
