"""Accelerator table: which device types we know, their collective backend, and how to
reach their RNG. Kept generic (a table, not if/else per vendor) so npu, cuda and an
emulated npu all go through the same code.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("npu_runtime")

# (device type, collective backend), in order of preference.
ACCELERATORS: tuple[tuple[str, str], ...] = (("npu", "hccl"), ("cuda", "nccl"))
CPU_BACKEND = "gloo"

_torch_npu_state: bool | None = None


def import_torch_npu() -> bool:
    """Import torch_npu if it is installed and loads; never required."""
    global _torch_npu_state
    if _torch_npu_state is None:
        try:
            import torch_npu  # noqa: F401
        except ImportError:
            _torch_npu_state = False
        except Exception as exc:  # noqa: BLE001 - e.g. OSError: libhccl.so missing without CANN
            log.warning("npu_runtime: torch_npu is installed but failed to import: %s", exc)
            _torch_npu_state = False
        else:
            _torch_npu_state = True
    return _torch_npu_state


def module_for(device_type: str) -> Any | None:
    """``torch.npu`` / ``torch.cuda`` if the attribute exists, else None. A ``torch.npu``
    that *is* ``torch.cuda`` is the migrated code's stand-in where torch_npu is missing
    (npu-migrate's import guard: ``torch.npu = torch.cuda``), not an NPU: None."""
    import torch

    module = getattr(torch, device_type, None)
    if device_type != "cuda" and module is not None and module is getattr(torch, "cuda", None):
        return None
    return module


def is_available(device_type: str) -> bool:
    mod = module_for(device_type)
    try:
        return bool(mod is not None and mod.is_available() and mod.device_count() > 0)
    except Exception:  # noqa: BLE001 - a half-registered backend must not break the CPU path
        return False


def accelerator_type() -> str | None:
    """The first available accelerator type in ACCELERATORS, or None (CPU)."""
    for device_type, _ in ACCELERATORS:
        if is_available(device_type):
            return device_type
    return None


def backend_for(device_type: str | None) -> str:
    for dt, backend in ACCELERATORS:
        if dt == device_type:
            return backend
    return CPU_BACKEND


def is_initialized(device_type: str) -> bool:
    """True if the device runtime was started, so reading its RNG costs nothing new."""
    mod = module_for(device_type)
    if mod is None:
        return False
    probe = getattr(mod, "is_initialized", None)
    try:
        return bool(probe()) if probe is not None else is_available(device_type)
    except Exception:  # noqa: BLE001 - probing a backend must never raise
        return False
