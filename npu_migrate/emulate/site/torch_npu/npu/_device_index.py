"""Device indices of the emulated NPU: how many there are, the current one, and a
``device`` argument (``None``, ``"npu:1"``, a ``torch.device``, an int) as a checked
index. ``torch_npu.npu`` re-exports them, and ``torch_npu.npu.random`` uses them.
"""

from __future__ import annotations

from typing import Any

import torch


def _ops():
    return torch.ops.npu_emu


def device_count() -> int:
    return int(_ops().device_count())


def current_device() -> int:
    return torch.accelerator.current_device_index()


def _get_device_index(device: Any = None, optional: bool = True) -> int:
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"Expected a npu device, but got: {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise ValueError(f"Invalid device: {device!r}")


def _check_index(idx: int) -> int:
    if idx < 0 or idx >= device_count():
        raise AssertionError(
            f"Invalid device id {idx}: the emulated NPU has {device_count()} device(s)"
        )
    return idx
