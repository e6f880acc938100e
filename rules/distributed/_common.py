"""Shared by the distributed rules (NPU2xx): where backend strings go in torch's APIs
(the strings themselves: ``npu_migrate/tables/backends.py``)."""

from __future__ import annotations

DIST = "torch.distributed"
C10D = "torch.distributed.distributed_c10d"

#: function -> (keyword, 0-based position) of its ``backend`` parameter (torch 2.13 signatures)
BACKEND_PARAMS: dict[str, tuple[str, int]] = {}
for _module in (DIST, C10D):
    BACKEND_PARAMS[f"{_module}.init_process_group"] = ("backend", 0)
    BACKEND_PARAMS[f"{_module}.new_group"] = ("backend", 2)
    BACKEND_PARAMS[f"{_module}.new_subgroups"] = ("backend", 3)
    BACKEND_PARAMS[f"{_module}.new_subgroups_by_enumeration"] = ("backend", 2)
# DeepSpeed takes the torch backend name and supports hccl through its NPU accelerator.
BACKEND_PARAMS["deepspeed.init_distributed"] = ("dist_backend", 0)
BACKEND_PARAMS["deepspeed.comm.init_distributed"] = ("dist_backend", 0)

GET_BACKEND = (f"{DIST}.get_backend", f"{C10D}.get_backend")
BACKEND_NCCL = (f"{DIST}.Backend.NCCL", f"{C10D}.Backend.NCCL")

#: argparse option names whose default is a process-group backend
ARGPARSE_BACKEND_OPTIONS = frozenset(
    {"backend", "dist-backend", "dist_backend", "distributed-backend", "distributed_backend", "ddp-backend", "ddp_backend"}
)
