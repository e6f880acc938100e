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
