"""NPU956: DeepEP and NVSHMEM are CUDA-only (expert-parallel all-to-all over NVLink/RDMA)."""

from __future__ import annotations

from npu_migrate.python.rule import Example
from npu_migrate.rules.cluster.python._common import ExternalCudaOnly

ROUTE = (
    "DeepEP and NVSHMEM have no Ascend build: dispatch and combine the tokens with "
    "torch.distributed.all_to_all_single over HCCL, or torch_npu's fused MoE ops "
    "torch_npu.npu_moe_distribute_dispatch / torch_npu.npu_moe_distribute_combine, and keep the DeepEP path for CUDA"
)


class DeepEpNvshmem(ExternalCudaOnly):
    id = "NPU956"
    impact = "blocking"
    name = "deep-ep-nvshmem"
    summary = "Report DeepEP (`deep_ep`) and NVSHMEM imports: expert-parallel communication built on CUDA only"
    label = "DeepEP/NVSHMEM"
    packages = ("deep_ep", "nvshmem", "pynvshmem")
    problem = "DeepEP's kernels and NVSHMEM (GPU-initiated communication over NVLink/InfiniBand) are built for CUDA only"
    import_suggestion = ROUTE
    triggers = ("deep_ep", "nvshmem")
    rationale = f"""
DeepEP (`import deep_ep`: `deep_ep.Buffer`, `dispatch`/`combine`, its low-latency
mode) is a CUDA extension on top of NVSHMEM (`nvshmem`, nvshmem4py, `pynvshmem`);
MoE frameworks import it at module level for expert parallelism. Neither has an
Ascend build, so the import fails and the model cannot be built. Route: {ROUTE}.
A guarded import (`try:` / `if`) is reported as such: make sure the fallback is
the path taken on NPU. The torch_npu op names are checked against the
torch_npu API table (`npu_migrate/data/torch_npu_api.json`).
"""
    examples = (
        Example("from deep_ep import Buffer, EventOverlap  # reported\n"),
        Example("import torch.distributed as dist\n"),
    )
