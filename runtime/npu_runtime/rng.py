"""Capture and restore every random generator a training step may draw from.

python ``random``, numpy's legacy global generator (if numpy is importable), torch's CPU
generator and, for each accelerator in the device table that has been initialised,
every per-device generator. States are stored as plain lists/tensors so checkpoints
load with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from . import devices

log = logging.getLogger("npu_runtime")


def _numpy():
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def capture() -> dict[str, Any]:
    import torch

    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "torch": torch.get_rng_state(),
        "devices": {},
    }
    np = _numpy()
    if np is not None:
        name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
        state["numpy"] = [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)]
    for device_type, _ in devices.ACCELERATORS:
        if devices.is_initialized(device_type):
            state["devices"][device_type] = list(devices.module_for(device_type).get_rng_state_all())
    return state


def restore(state: dict[str, Any]) -> None:
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        np = _numpy()
        if np is None:
            log.warning("npu_runtime: checkpoint holds a numpy RNG state but numpy is not importable")
        else:
            name, keys, pos, has_gauss, cached = state["numpy"]
            np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    for device_type, states in state.get("devices", {}).items():
        mod = devices.module_for(device_type)
        if mod is None or not devices.is_available(device_type):
            log.warning("npu_runtime: checkpoint holds %s RNG states but no %s device is available; skipped",
                        device_type, device_type)
            continue
        if len(states) != mod.device_count():
            log.warning("npu_runtime: checkpoint holds %d %s RNG states but %d devices are visible; "
                        "restoring the first %d", len(states), device_type, mod.device_count(),
                        min(len(states), mod.device_count()))
            for i, s in enumerate(states[: mod.device_count()]):
                mod.set_rng_state(s, i)
            continue
        mod.set_rng_state_all(states)
