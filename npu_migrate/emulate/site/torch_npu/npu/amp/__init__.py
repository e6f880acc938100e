"""``torch.npu.amp``: autocast and GradScaler bound to the emulated ``npu`` device."""

from __future__ import annotations

import functools

import torch

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.npu.amp.autocast(...)`` == ``torch.autocast("npu", ...)``."""

    def __init__(
        self,
        enabled: bool = True,
        dtype: torch.dtype = torch.float16,
        cache_enabled: bool = True,
    ):
        super().__init__(
            "npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled
        )


class GradScaler(torch.amp.GradScaler):
    """``torch.npu.amp.GradScaler(...)`` == ``torch.amp.GradScaler("npu", ...)``."""

    def __init__(
        self,
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
        **kwargs,
    ):
        super().__init__(
            "npu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


def custom_fwd(fwd=None, *, cast_inputs=None):
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    return torch.amp.custom_bwd(bwd, device_type="npu")
