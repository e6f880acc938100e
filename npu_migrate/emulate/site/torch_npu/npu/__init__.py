"""``torch.npu`` / ``torch_npu.npu`` of the emulated NPU (npu-migrate).

Device management, RNG, memory statistics, streams/events and AMP, backed by
the emulator's C++ PrivateUse1 extension. Every other name of the real
``torch_npu.npu.__all__`` exists but raises NotImplementedError naming the
emulator; names the real module lacks raise AttributeError.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from typing import Any

import torch

from npu_migrate.emulate.api_names import NPU_ALL, api_table_names, unimplemented

from . import amp  # noqa: F401  (torch.npu.amp)
from ._device_index import _check_index, _get_device_index, _ops
from ._device_index import current_device as current_device  # torch.npu.current_device
from ._device_index import device_count as device_count  # torch.npu.device_count
from ._legacy_tensors import LEGACY_TENSOR_TYPES

_EMULATED_TOTAL_MEMORY = int(
    float(os.environ.get("NPU_MIGRATE_EMULATOR_MEMORY_GB", "64")) * (1 << 30)
)
_DEVICE_NAME = "Ascend (npu-migrate emulated NPU)"


# --------------------------------------------------------------- devices --


def is_initialized() -> bool:
    return True


def init() -> None:
    return None


def _lazy_init() -> None:
    return None


def is_available() -> bool:
    return True


def set_device(device) -> None:
    idx = _get_device_index(device)
    if idx >= 0:
        torch.accelerator.set_device_index(idx)


def synchronize(device=None) -> None:
    _check_index(_get_device_index(device))
    # Every emulated kernel has completed when it returns.


def can_device_access_peer(device, peer_device) -> bool:
    _check_index(_get_device_index(device))
    _check_index(_get_device_index(peer_device))
    return True


def get_device_name(device_name=None) -> str:
    _check_index(_get_device_index(device_name))
    return _DEVICE_NAME


class _DeviceProperties:
    """Shape of torch_npu's device properties: no major/minor (see NOTES)."""

    def __init__(self) -> None:
        self.name = _DEVICE_NAME
        self.total_memory = _EMULATED_TOTAL_MEMORY
        self.cube_core_num = 1
        self.vector_core_num = 1
        self.L2_cache_size = 0

    def __repr__(self) -> str:
        return (
            f"_NPUDeviceProperties(name='{self.name}', "
            f"total_memory={self.total_memory >> 20}MB, cube_core_num={self.cube_core_num}, "
            f"vector_core_num={self.vector_core_num}, L2_cache_size={self.L2_cache_size >> 20}MB)"
        )


def get_device_properties(device_name=None) -> _DeviceProperties:
    _check_index(_get_device_index(device_name))
    return _DeviceProperties()


def get_device_capability(device=None):
    """None unless TORCH_NPU_DEVICE_CAPABILITY="major.minor" is set, as in torch_npu."""
    _check_index(_get_device_index(device))
    env = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY")
    if not env:
        return None
    major, _, minor = env.partition(".")
    return int(major), int(minor or 0)


def mem_get_info(device=None) -> tuple[int, int]:
    idx = _check_index(_get_device_index(device))
    used = memory_allocated(idx)
    return max(_EMULATED_TOTAL_MEMORY - used, 0), _EMULATED_TOTAL_MEMORY


def utilization(device=None) -> int:
    _check_index(_get_device_index(device))
    return 0


def is_bf16_supported(including_emulation: bool = False) -> bool:
    return True


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled("npu", enabled)


def get_autocast_dtype():
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype) -> None:
    torch.set_autocast_dtype("npu", dtype)


class device:
    """Context manager that changes the current npu device."""

    def __init__(self, device):
        self.idx = _get_device_index(device) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx < 0:
            return
        self.prev_idx = current_device()
        if self.prev_idx != self.idx:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of *obj* current (no-op for CPU tensors)."""

    def __init__(self, obj):
        idx = obj.get_device() if getattr(obj, "is_npu", False) else -1
        super().__init__(idx if idx >= 0 else None)


# --------------------------------------------------------------- streams --


class Stream(torch.Stream):
    """An npu stream. The emulator runs everything in order, so streams never overlap."""

    def __new__(cls, device=None, priority=0, **kwargs):
        idx = _get_device_index(device)
        return super().__new__(cls, device=torch.device("npu", idx), priority=priority)

    def wait_event(self, event) -> None:
        return None

    def wait_stream(self, stream) -> None:
        return None

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    @property
    def npu_stream(self) -> int:
        return self.stream_id


class Event:
    """An npu event. Kernels complete in order, so an event is done once recorded;
    timing uses host clock stamps taken at record()."""

    def __init__(
        self, enable_timing=False, blocking=False, interprocess=False, **kwargs
    ):
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._stamp: float | None = None
        self.device = torch.device("npu", current_device())

    def record(self, stream=None) -> None:
        self._stamp = time.perf_counter()

    def wait(self, stream=None) -> None:
        return None

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end_event: Event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError(
                "Both events must be created with argument 'enable_timing=True'."
            )
        if self._stamp is None or end_event._stamp is None:
            raise RuntimeError(
                "Both events must be recorded before calculating elapsed time."
            )
        return (end_event._stamp - self._stamp) * 1000.0


def current_stream(device=None) -> Stream:
    idx = _get_device_index(device)
    s = torch.accelerator.current_stream(idx)
    return _as_stream(s)


def default_stream(device=None) -> Stream:
    return current_stream(device)


def _as_stream(s: torch.Stream) -> Stream:
    if isinstance(s, Stream):
        return s
    return Stream(device=s.device_index)


def set_stream(stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = current_stream()
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.prev is not None:
            set_stream(self.prev)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


def is_current_stream_capturing() -> bool:
    return False


_sync_debug_mode = 0


def set_sync_debug_mode(debug_mode) -> None:
    global _sync_debug_mode
    _sync_debug_mode = {"default": 0, "warn": 1, "error": 2}.get(debug_mode, debug_mode)


def get_sync_debug_mode() -> int:
    return _sync_debug_mode


# ------------------------------------------------------------------- RNG --
# torch.npu.random (transformers' Trainer checkpoints RNG state through it);
# the same functions are torch.npu's own, as in torch_npu.
from . import random as random
from .random import (  # noqa: F401
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)


def _is_in_bad_fork() -> bool:
    return False


# ---------------------------------------------------------------- memory --


def _stats(device=None) -> list[int]:
    return list(_ops().memory_stats(_check_index(_get_device_index(device))))


def memory_allocated(device=None) -> int:
    return _stats(device)[0]


def max_memory_allocated(device=None) -> int:
    return _stats(device)[1]


# No caching allocator is modelled: reserved == allocated.
memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated
memory_cached = memory_allocated
max_memory_cached = max_memory_allocated


def reset_peak_memory_stats(device=None) -> None:
    _ops().reset_peak(_check_index(_get_device_index(device)))


reset_max_memory_allocated = reset_peak_memory_stats
reset_max_memory_cached = reset_peak_memory_stats


def reset_accumulated_memory_stats(device=None) -> None:
    _ops().reset_counts(_check_index(_get_device_index(device)))


def memory_stats(device=None) -> OrderedDict[str, int]:
    allocated, peak, n_alloc, n_free = _stats(device)
    out: OrderedDict[str, int] = OrderedDict()
    for kind in ("allocated_bytes", "reserved_bytes", "active_bytes"):
        out[f"{kind}.all.current"] = allocated
        out[f"{kind}.all.peak"] = peak
    out["allocation.all.allocated"] = n_alloc
    out["allocation.all.freed"] = n_free
    out["allocation.all.current"] = n_alloc - n_free
    out["num_alloc_retries"] = 0
    out["num_ooms"] = 0
    return out


def memory_stats_as_nested_dict(device=None) -> dict:
    nested: dict = {}
    for key, value in memory_stats(device).items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


def memory_summary(device=None, abbreviated=False) -> str:
    idx = _check_index(_get_device_index(device))
    allocated, peak, n_alloc, n_free = _stats(idx)
    return (
        f"npu-migrate emulated NPU {idx}: allocated {allocated} B, peak {peak} B, "
        f"{n_alloc} allocations, {n_free} frees (no caching allocator is modelled)"
    )


def memory_snapshot() -> list:
    return []


def empty_cache() -> None:
    return None


def ipc_collect() -> None:
    return None


def get_allocator_backend() -> str:
    return "native"


_memory_fraction: dict[int, float] = {}


def set_per_process_memory_fraction(fraction, device=None) -> None:
    _memory_fraction[_check_index(_get_device_index(device))] = float(fraction)


def get_per_process_memory_fraction(device=None) -> float:
    return _memory_fraction.get(_check_index(_get_device_index(device)), 1.0)


# ------------------------------------------------------- options / config --


class _HF32Switch:
    """``torch.npu.matmul`` / ``torch.npu.conv``: a settable ``allow_hf32`` flag."""

    def __init__(self, default: bool) -> None:
        object.__setattr__(self, "_allow_hf32", default)

    @property
    def allow_hf32(self) -> bool:
        return self._allow_hf32

    @allow_hf32.setter
    def allow_hf32(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(
                f"allow_hf32 must be a bool, but got {type(value).__name__}"
            )
        object.__setattr__(self, "_allow_hf32", value)


# torch_npu's defaults: HF32 off for matmul, on for convolution.
matmul = _HF32Switch(False)
conv = _HF32Switch(True)


class _Config:
    """``torch.npu.config``; ``allow_internal_format`` is accepted and recorded."""

    def __init__(self) -> None:
        self.allow_internal_format = False


config = _Config()
_options: dict[str, Any] = {}


def set_option(option: dict) -> None:
    if not isinstance(option, dict):
        raise TypeError("npu option must be a dict.")
    _options.update(option)


_compile_mode = {"jit_compile": False}


def set_compile_mode(jit_compile: bool = False) -> None:
    _compile_mode["jit_compile"] = bool(jit_compile)


def is_jit_compile_false() -> bool:
    return not _compile_mode["jit_compile"]


_task_queue = {"enable": True}


def set_task_queue_enable(enable: bool) -> None:
    _task_queue["enable"] = bool(enable)


def get_task_queue_enable() -> bool:
    return _task_queue["enable"]


def get_npu_overflow_flag() -> bool:
    return False


def clear_npu_overflow_flag() -> None:
    return None


def enable_deterministic_with_backward(tensor):
    return tensor


def disable_deterministic_with_backward(tensor):
    return tensor


globals().update(LEGACY_TENSOR_TYPES)

# ------------------------------------------------ unimplemented real names --

_IMPLEMENTED = {name for name in NPU_ALL if name in globals()}
for _name in NPU_ALL:
    if _name not in globals():
        globals()[_name] = unimplemented(f"torch.npu.{_name}")
del _name

__all__ = list(NPU_ALL)

_TABLE = None


def __getattr__(name: str):
    global _TABLE
    if not name.startswith("__"):
        if _TABLE is None:
            _TABLE = api_table_names("torch.npu") or frozenset()
        if name in _TABLE:
            # A real torch_npu name outside __all__ (often a submodule): fail at access.
            unimplemented(f"torch.npu.{name}")()
    raise AttributeError(f"module 'torch.npu' has no attribute '{name}'")
