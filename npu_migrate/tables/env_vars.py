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

#: CUDA runtime and PyTorch-on-CUDA variables whose Ascend counterpart has the same
#: meaning and value format. ASCEND_LAUNCH_BLOCKING (1: synchronous ops, no task
#: queue) and PYTORCH_NPU_ALLOC_CONF (the caching allocator's options:
#: expandable_segments, max_split_size_mb, garbage_collection_threshold,
#: roundup_power2_divisions) are read by torch_npu 2.13 (libtorch_npu.so literals).
CUDA_SAME_MEANING = {
    "CUDA_VISIBLE_DEVICES": "ASCEND_RT_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING": "ASCEND_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_NPU_ALLOC_CONF",
}

#: CUDA variables with no Ascend counterpart: what to do instead.
CUDA_ADVICE = {
    "CUDA_DEVICE_MAX_CONNECTIONS": (
        "no documented CANN counterpart: the NPU runtime does not read it. Megatron-LM asserts it is 1 "
        "before overlapping communication with computation; keep setting it where that assert runs "
        "(harmless on NPU), drop it elsewhere"
    ),
}

#: Every CUDA variable the tool renames or reports.
CUDA_VARIABLES = (*CUDA_SAME_MEANING, *CUDA_ADVICE)

#: NCCL variables whose HCCL counterpart has the same meaning and value format.
#: The first three are ProcessGroup watchdog switches that torch_npu reads under
#: both spellings (libtorch_npu.so literals); HCCL_SOCKET_IFNAME is read by HCCL
#: itself (CANN environment-variable reference), not by torch_npu.
NCCL_SAME_MEANING = {
    "NCCL_ASYNC_ERROR_HANDLING": "HCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT": "HCCL_BLOCKING_WAIT",
    "NCCL_DESYNC_DEBUG": "HCCL_DESYNC_DEBUG",
    "NCCL_SOCKET_IFNAME": "HCCL_SOCKET_IFNAME",
}

#: Variables whose Ascend counterpart has the same meaning and value format.
SAME_MEANING = {**CUDA_SAME_MEANING, **NCCL_SAME_MEANING}

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
}

#: Advice for an NCCL variable that is in neither table.
GENERIC_NCCL = "no HCCL counterpart in torch_npu 2.13; remove it, or look up the HCCL setting in the CANN environment-variable reference"


def ascend_name(name: str, torch_npu_env_vars: Collection[str]) -> str | None:
    """The Ascend variable that means the same as ``name``, if there is one.
    ``TORCH_NCCL_X`` maps to ``TORCH_HCCL_X`` when torch_npu reads that name."""
    if name.startswith("TORCH_NCCL_"):
        candidate = "TORCH_HCCL_" + name[len("TORCH_NCCL_") :]
        return candidate if candidate in torch_npu_env_vars else None
    return SAME_MEANING.get(name)


def advice(name: str) -> str:
    """What to do about a variable that has no Ascend counterpart."""
    return CUDA_ADVICE.get(name) or ADVICE.get(name, GENERIC_NCCL)
