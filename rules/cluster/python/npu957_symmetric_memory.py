"""NPU957: ``torch.distributed._symmetric_memory`` is CUDA-only."""

from __future__ import annotations

from npu_migrate.python.rule import Example
from npu_migrate.rules.cluster.python._common import ExternalCudaOnly

ROUTE = (
    "symmetric memory has no HCCL backend: use the ordinary collectives of torch.distributed (all_reduce, "
    "all_gather_into_tensor, all_to_all_single), which torch_npu runs over HCCL, and keep the "
    "symmetric-memory path for CUDA"
)


class SymmetricMemory(ExternalCudaOnly):
    id = "NPU957"
    impact = "blocking"
    name = "symmetric-memory"
    summary = "Report `torch.distributed._symmetric_memory`: CUDA-only (NVSHMEM/CUDA IPC) peer memory"
    label = "symmetric memory"
    packages = ("torch.distributed._symmetric_memory", "torch.ops.symm_mem")
    problem = ("torch's symmetric memory (`symm_mem.empty`, `rendezvous`, fused all-gather-matmul) is implemented "
               "for CUDA devices only")
    import_suggestion = ROUTE
    triggers = ("_symmetric_memory", "symm_mem")
    rationale = f"""
`torch.distributed._symmetric_memory` (`symm_mem.empty(...)`, `symm_mem.rendezvous(t,
group)`, `torch.ops.symm_mem.*` fused collectives and matmuls) maps buffers of
peer GPUs into each other's address space through CUDA IPC or NVSHMEM; it is a
private torch module with CUDA backends only (torch 2.13.0:
`torch/distributed/_symmetric_memory/__init__.py` runs its collectives on
`torch.cuda` streams, and its backends are `_nccl.py`, `_nvshmem_triton.py` and
`_rocshmem_triton.py`), so on Ascend the allocation or the rendezvous fails. Pre-training frameworks use it for tensor-parallel
communication overlap. Route: {ROUTE}.
"""
    examples = (
        Example("import torch.distributed._symmetric_memory as symm_mem  # reported\n"),
        Example("import torch.distributed as dist\n"),
    )
