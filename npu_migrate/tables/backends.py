"""Process-group backend strings and their Ascend spelling (``nccl`` -> ``hccl``)."""

from __future__ import annotations

import re

_PAIR = re.compile(r"^([a-z]+):([a-z]+)$", re.IGNORECASE)


def hccl_backend(value: str) -> str | None:
    """The Ascend spelling of a backend string, or None if it needs no change
    or cannot be mapped. ``nccl`` (any case: torch's ``Backend`` lower-cases it) ->
    ``hccl``; ``cpu:gloo,cuda:nccl`` -> ``cpu:gloo,npu:hccl``."""
    if value.lower() == "nccl":
        return "hccl"
    if "," not in value and ":" not in value:
        return None
    parts = []
    for part in value.split(","):
        match = _PAIR.match(part.strip())
        if match is None:
            return None
        device, backend = match.groups()
        if device.lower() == "cuda":
            device = "npu"
        if backend.lower() == "nccl":
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


_BACKEND_KEY = re.compile(r"(?:^|_)(?:dist_|distributed_|ddp_|process_group_|pg_)?backend$", re.IGNORECASE)
_NOT_A_BACKEND = re.compile(r"rdzv|rendezvous|attention|attn|kernel|sampling|compile|dispatcher|inference|mp_", re.IGNORECASE)


def is_backend_key(name: str) -> bool:
    """``--backend``, ``--dist-backend``, ``--distributed_backend``, ``trainer.dist_backend``:
    names that hold a process-group backend. Not ``--rdzv-backend`` (rendezvous),
    ``--attention-backend`` and the like, whose values are never ``nccl`` anyway."""
    key = name.lstrip("-+").replace("-", "_").rsplit(".", 1)[-1]
    # `weight_sync_backend` names its own system in the key (SkyRL's trainer-to-vLLM
    # weight sync: `"nccl"`/`"delta"`, asserted by that name), as an owner would
    return bool(_BACKEND_KEY.search(key)) and not _NOT_A_BACKEND.search(key) and not _OTHER_SYSTEMS_OWNER.search(key)


#: Owners whose ``backend`` is another system's engine name, not a process-group backend:
#: verl's checkpoint engine (its HCCL engine is registered under ``"nccl"`` too, so
#: ``"hccl"`` names no engine), vLLM's weight transfer and KV-cache transfer/connectors.
_OTHER_SYSTEMS_OWNER = re.compile(r"checkpoint_?engine|weight_?(?:transfer|sync)|kv_?(?:transfer|connector)",
                                  re.IGNORECASE)


def other_systems_owner(names) -> str | None:
    """The first of ``names`` (the keys above a config value, the callee or the
    attribute chain holding a ``backend``) that belongs to another system's engine
    (``checkpoint_engine``, ``CheckpointEngineConfig``, ``weight_transfer_config``), or None."""
    return next((name for name in names if name and _OTHER_SYSTEMS_OWNER.search(name)), None)
