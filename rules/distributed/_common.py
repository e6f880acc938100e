"""Shared by the distributed rules (NPU2xx): backend strings and where they go."""

from __future__ import annotations

import re

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

_PAIR = re.compile(r"^([a-z]+):([a-z]+)$")


def hccl_backend(value: str) -> str | None:
    """The Ascend spelling of a backend string, or None if it needs no change
    or cannot be mapped. ``nccl`` -> ``hccl``; ``cpu:gloo,cuda:nccl`` -> ``cpu:gloo,npu:hccl``."""
    if value == "nccl":
        return "hccl"
    if "," not in value and ":" not in value:
        return None
    parts = []
    for part in value.split(","):
        match = _PAIR.match(part.strip())
        if match is None:
            return None
        device, backend = match.groups()
        if device == "cuda":
            device = "npu"
        if backend == "nccl":
            backend = "hccl"
        parts.append(part.replace(match.group(0), f"{device}:{backend}"))
    new = ",".join(parts)
    return new if new != value else None


def mentions_nccl(value: str) -> bool:
    """The whole string is a backend spec naming nccl: ``"nccl"``, ``"NCCL"``,
    ``"cpu:gloo,cuda:nccl"`` (not prose that happens to contain the word)."""
    value = value.strip().lower()
    if value == "nccl":
        return True
    pairs = [_PAIR.match(part.strip()) for part in value.split(",")]
    return all(pairs) and any(p.group(2) == "nccl" for p in pairs)
