"""The module wrappers behind :mod:`npu_runtime.parallel` (this module imports torch)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import torch
from torch import nn
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
from torch.nn.parallel import DistributedDataParallel

log = logging.getLogger("npu_runtime")

PREFIX = "module."


def to_device(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor in it (through tuples, namedtuples, lists and dicts)
    moved to ``device``: what DataParallel's scatter does for a single device."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(to_device(v, device) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return type(value)((k, to_device(v, device)) for k, v in value.items())
    return value


class SingleProcessDataParallel(nn.DataParallel):
    """``nn.DataParallel`` over exactly one device, without its CUDA-only scatter.

    What ``nn.DataParallel(module)`` does on one CUDA device, on the current NPU (or the
    CPU): the module moves to the device at construction, inputs are moved there on
    every call, ``.module`` is the wrapped module and state-dict keys carry the
    ``module.`` prefix, so checkpoints written by the CUDA original load unchanged, and
    ``isinstance(model, nn.DataParallel)`` still holds.
    """

    def __init__(self, module: nn.Module, device: torch.device | str | None = None, dim: int = 0) -> None:
        nn.Module.__init__(self)
        self.module = module
        self.dim = dim
        device = _current_device() if device is None else torch.device(device)
        if device.type == "cpu":
            # What DataParallel itself does without an accelerator: a pass-through.
            self.device_ids: list[int] = []
            self.output_device = None
            self.src_device_obj = None
        else:
            index = device.index if device.index is not None else _device_module(device.type).current_device()
            self.src_device_obj = torch.device(device.type, index)
            self.device_ids = [index]
            self.output_device = index
            module.to(self.src_device_obj)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.src_device_obj is not None:
            inputs, kwargs = to_device((inputs, kwargs), self.src_device_obj)
        return self.module(*inputs, **kwargs)


class TransparentDDP(DistributedDataParallel):
    """DistributedDataParallel that looks like the model it wraps.

    ``state_dict()`` and ``load_state_dict()`` are the model's own (no ``module.``
    prefix; a checkpoint whose keys all carry one still loads), and attributes DDP
    does not have are looked up on the model (``model.fc``, ``model.generate``). A
    single-device script converted to DDP (rule NPU511) keeps working, and its
    checkpoints stay interchangeable with one-process runs.
    """

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self.module.load_state_dict(strip_prefix(state_dict, self.module), strict=strict, assign=assign)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":
                raise
            return getattr(super().__getattr__("module"), name)

    # Container models (nn.Sequential, nn.ModuleList) are indexed and iterated too.
    def __getitem__(self, index: Any) -> Any:
        return self.module[index]

    def __len__(self) -> int:
        return len(self.module)

    def __iter__(self) -> Any:
        return iter(self.module)


def strip_prefix(state_dict: Any, model: nn.Module) -> Any:
    """``state_dict`` without a ``module.`` prefix that every key has and ``model``'s own
    keys do not (a checkpoint of a DataParallel/DDP-wrapped model); else unchanged."""
    keys = list(state_dict)
    if not keys or not all(k.startswith(PREFIX) for k in keys):
        return state_dict
    if any(k.startswith(PREFIX) for k in model.state_dict()):
        return state_dict
    copy = OrderedDict(state_dict)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        copy._metadata = OrderedDict(metadata)  # type: ignore[attr-defined]
    consume_prefix_in_state_dict_if_present(copy, PREFIX)
    return copy


def wrap_ddp(cls: type[DistributedDataParallel] | None, module: nn.Module, device: torch.device,
             ddp_kwargs: dict[str, Any]) -> nn.Module:
    """``module`` on ``device``, in DDP (or ``cls``) with ``device_ids=[device]``."""
    if isinstance(module, DistributedDataParallel):
        log.warning("npu_runtime: the module is already DistributedDataParallel; not wrapped again")
        return module
    module.to(device)
    kwargs = dict(ddp_kwargs)
    if device.type != "cpu":
        kwargs.setdefault("device_ids", [device.index])
    return (cls or DistributedDataParallel)(module, **kwargs)


def _device_module(device_type: str) -> Any:
    return getattr(torch, device_type)


def _current_device() -> torch.device:
    from . import devices

    device_type = devices.accelerator_type()
    if device_type is None:
        return torch.device("cpu")
    return torch.device(device_type, _device_module(device_type).current_device())
