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
