"""The CPU twin's run-time layer: CUDA-only calls answer as on a CUDA machine.

The CPU twin's source is the project migrated by the normal rules to the CPU
target (npu_migrate/pipeline/target.py): device strings say ``cpu``, the backend is
``gloo``, autocast and GradScaler name ``"cpu"``. What only the NPU target
rewrites (``torch.cuda.X``, ``x.cuda()``, ``Module.cuda()``) stays CUDA code in
the twin, and this layer makes it behave as the original does on a CUDA machine
with the data on the CPU, so that the CPU twin takes the same code paths as the
migrated twin:

* ``torch.cuda.is_available()`` is True, ``device_count()`` is verify's ``--nproc``
  (``NPU_MIGRATE_VERIFY_DEVICES``; else ``LOCAL_WORLD_SIZE``, 1), ``current_device()`` is
  the last ``set_device`` (else ``LOCAL_RANK``); ``synchronize``, ``empty_cache``, the memory
  statistics (0) and the peak resets are no-ops; streams and events are dummies;
* the CUDA generator is the CPU one (``torch.cuda.manual_seed(_all)`` seeds it, as
  the emulated NPU's generator is the CPU one);
* ``Tensor.cuda()`` / ``Module.cuda()`` and ``.to(N)`` with an integer device (the
  accelerator N, which the NPU target leaves as it is) move to (stay on) the CPU; ``pin_memory()``
  is a no-op; ``torch.load(map_location="cpu:N")`` (the CPU target's ``cuda:N``) loads
  to the CPU;
* CPU autocast defaults to float16, CUDA's default (the CPU's own is bfloat16);
* ``torch.distributed.is_nccl_available()`` is True, and DDP drops ``device_ids`` /
  ``output_device`` for a CPU module (gloo DDP refuses them).

* ``nn.DataParallel`` wraps the module and calls it (as torch does on a CPU), which
  is what one process of the migrated twin's ``npu_runtime.data_parallel`` does.

Not covered (docs/verify.md): ``Tensor.is_cuda`` stays False, CUDA graphs, custom
CUDA kernels.
"""

from __future__ import annotations

import contextlib
import os
from types import SimpleNamespace


class _Event:
    def __init__(self, enable_timing: bool = False, *args, **kwargs) -> None:
        self._time = None

    def record(self, stream=None) -> None:
        import time

        self._time = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _Event) -> float:
        return ((end._time or 0.0) - (self._time or 0.0)) * 1000.0


class _Stream:
    def __init__(self, device=None, priority: int = 0, **kwargs) -> None:
        self.device = device

    def synchronize(self) -> None:
        pass

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record()
        return event

    def query(self) -> bool:
        return True


def install() -> None:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda
    # verify's --nproc (a script that starts its own processes asks device_count() how many)
    local = int(os.environ.get("NPU_MIGRATE_VERIFY_DEVICES") or os.environ.get("LOCAL_WORLD_SIZE", "1"))

    def constant(value):  # a new function each time: torch._dynamo refuses one object under two names
        return lambda *args, **kwargs: value

    generator = torch.default_generator
    current = [int(os.environ.get("LOCAL_RANK", "0"))]

    def set_device(device) -> None:  # remembered for current_device() (a spawned worker has no LOCAL_RANK)
        index = torch.device(device).index if isinstance(device, (str, torch.device)) else device
        if index is not None and int(index) >= 0:
            current[0] = int(index)

    def manual_seed(seed) -> None:
        generator.manual_seed(int(seed))

    properties = SimpleNamespace(name="CPU (npu-migrate verify)", major=8, minor=0, total_memory=64 * 2**30,
                                 multi_processor_count=1)
    replacements = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "init": constant(None),
        "device_count": lambda: local,
        "current_device": lambda: current[0],
        "set_device": set_device,
        "synchronize": constant(None),
        "empty_cache": constant(None),
        "ipc_collect": constant(None),
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed,
        "seed": lambda: generator.seed(),
        "seed_all": lambda: generator.seed(),
        "initial_seed": lambda: generator.initial_seed(),
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "set_rng_state": lambda state, device="cuda": torch.set_rng_state(state),
        "get_rng_state_all": lambda: [torch.get_rng_state() for _ in range(local)],
        "set_rng_state_all": lambda states: torch.set_rng_state(states[0]),
        "is_bf16_supported": constant(True),
        "get_device_name": lambda device=None: properties.name,
        "get_device_capability": lambda device=None: (properties.major, properties.minor),
        "get_device_properties": lambda device=None: properties,
        "memory_allocated": constant(0),
        "max_memory_allocated": constant(0),
        "memory_reserved": constant(0),
        "max_memory_reserved": constant(0),
        "memory_cached": constant(0),
        "reset_peak_memory_stats": constant(None),
        "reset_max_memory_allocated": constant(None),
        "reset_accumulated_memory_stats": constant(None),
        "memory_stats": lambda *args, **kwargs: {},
        "memory_summary": lambda *args, **kwargs: "",
        "mem_get_info": lambda device=None: (properties.total_memory, properties.total_memory),
        "Event": _Event,
        "Stream": _Stream,
        "current_stream": lambda device=None: _Stream(),
        "default_stream": lambda device=None: _Stream(),
        "stream": lambda stream=None: contextlib.nullcontext(),
        "device": lambda device=None: contextlib.nullcontext(),
        "set_per_process_memory_fraction": constant(None),
    }
    for name, value in replacements.items():
        setattr(cuda, name, value)

    def tensor_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        return self.to("cpu", non_blocking=non_blocking, memory_format=memory_format)

    torch.Tensor.cuda = tensor_cuda

    def integer_to_cpu(original):
        # .to(0) / .to(local_rank) means the accelerator with that index (cuda:N on the original's
        # machine, npu:N after migration, which leaves it as it is): here, the CPU
        def to(self, *args, **kwargs):
            if args and isinstance(args[0], int) and not isinstance(args[0], bool):
                args = ("cpu", *args[1:])
            if isinstance(kwargs.get("device"), int) and not isinstance(kwargs["device"], bool):
                kwargs["device"] = "cpu"
            return original(self, *args, **kwargs)

        return to

    torch.Tensor.to = integer_to_cpu(torch.Tensor.to)
    torch.nn.Module.to = integer_to_cpu(torch.nn.Module.to)
    original_load = torch.load

    def load(f, map_location=None, *args, **kwargs):
        # the CPU target writes map_location="cpu:N" for "cuda:N"; torch.load knows only "cpu"
        if isinstance(map_location, (str, torch.device)) and str(map_location).startswith("cpu:"):
            map_location = "cpu"
        elif isinstance(map_location, dict):
            map_location = {k: ("cpu" if str(v).startswith("cpu:") else v) for k, v in map_location.items()}
        return original_load(f, map_location, *args, **kwargs)

    torch.load = load
    torch.Tensor.pin_memory = lambda self, device=None: self
    torch.nn.Module.cuda = lambda self, device=None: self
    torch.set_autocast_dtype("cpu", torch.float16)
    # nn.DataParallel asks for the device type itself: on the CPU it wraps the module and calls it,
    # which is what one process of the migrated twin's npu_runtime.data_parallel does.
    import importlib

    importlib.import_module("torch.nn.parallel.data_parallel")._get_available_device_type = constant(None)

    if dist.is_available():
        dist.is_nccl_available = lambda: True
        from torch.nn.parallel import DistributedDataParallel

        original_init = DistributedDataParallel.__init__

        def ddp_init(self, module, *args, **kwargs):
            on_cpu = all(p.device.type == "cpu" for p in module.parameters())
            if on_cpu:
                kwargs.pop("device_ids", None)
                kwargs.pop("output_device", None)
                if args:  # DDP(module, device_ids, output_device, ...): drop the two positional ones
                    args = (None, None, *args[2:])
            original_init(self, module, *args, **kwargs)

        DistributedDataParallel.__init__ = ddp_init
