"""The reference twin's run-time layer: the **original** CUDA source, served by the emulated NPU.

The reference twin runs the project's source as it is (no rewrite) in a process
where the emulated NPU (npu_migrate/emulate/site/torch_npu) is loaded, the same
device the migrated twin runs on. This layer answers every CUDA call the way a
CUDA machine would, with the emulated ``npu`` device standing in for ``cuda``:
the approach of torch_npu's ``torch_npu.contrib.transfer_to_npu`` (read from the
published torch-npu 2.13.0 wheel; written again here, for the emulator, with
the gaps its users report closed). So the two twins differ only by the static
migration: same kernels, same autocast op lists, same RNG, same collectives.

What it does (:func:`install`):

* ``torch.cuda.X`` is ``torch.npu.X`` for every public name of the emulated
  ``torch.npu`` (``is_available`` True, ``device_count`` the emulator's, ``set_device``,
  ``synchronize``, memory statistics, RNG, streams, events, ``amp``), with ``cuda``
  device arguments mapped; ``get_device_capability`` answers ``(8, 0)`` (a CUDA
  machine's answer; the NPU's is None), ``get_device_properties`` has the same
  ``major``/``minor`` (the NPU's has none), and ``is_bf16_supported`` is True;
* every ``cuda`` device argument (a string, ``torch.device("cuda", i)``, or in a
  ``map_location`` dict) of torch's factory functions, ``torch.load``,
  ``Tensor.to/new_*/pin_memory``, ``Module.to/to_empty``, ``torch.Generator``,
  ``with torch.device("cuda")``, ``torch.set_default_device``, DataLoader's
  ``pin_memory_device``, FSDP, DeviceMesh and DDP is ``npu`` (an integer device is
  already the current accelerator, the npu, in torch 2.13);
* ``Tensor.cuda()`` / ``Module.cuda()`` are ``.npu()`` (a cuda device argument mapped),
  ``Tensor.is_cuda`` is ``is_npu``;
* ``autocast("cuda")`` / ``torch.cuda.amp.autocast()`` autocast on the npu with its
  (the accelerator's) op lists, ``GradScaler()`` / ``GradScaler("cuda")`` scale on the
  npu; ``torch.is_autocast_enabled()`` and friends answer for the npu;
* ``init_process_group("nccl")`` (and ``new_group``) use ``hccl``, the emulator's
  backend; ``is_nccl_available()`` is True;
* ``torch._utils._get_available_device_type()`` is ``npu`` (``nn.DataParallel``).

``torch.accelerator`` is the emulated npu, except that ``current_accelerator()`` called
from the project's own files (under ``NPU_MIGRATE_VERIFY_ROOT``) answers ``cuda``, as on
a CUDA machine, so that ``device.type == "cuda"`` on it holds; torch's and the libraries'
own calls get the npu (they run unchanged in both twins). Libraries
that look for torch_npu themselves (transformers, accelerate) find the emulated one,
as they find the real one on an Ascend machine.

What it cannot do (docs/verify.md): a tensor's ``device.type`` is ``npu``, so a script
that branches on ``x.device.type == "cuda"`` takes the other branch here;
``torch.version.cuda`` is None; CUDA graphs, custom CUDA kernels and Triton are absent.
"""

from __future__ import annotations

import functools
import os
import sys

#: torch's functions that take a device (transfer_to_npu's list, less what torch 2.13 lacks).
FACTORIES = (
    "logspace", "randint", "hann_window", "rand", "full_like", "ones_like", "rand_like", "randperm", "arange",
    "frombuffer", "normal", "empty_strided", "empty_like", "scalar_tensor", "tril_indices", "bartlett_window", "ones",
    "sparse_coo_tensor", "randn", "kaiser_window", "tensor", "triu_indices", "as_tensor", "zeros", "randint_like",
    "full", "eye", "empty", "blackman_window", "zeros_like", "range", "sparse_csr_tensor", "randn_like", "from_file",
    "linspace", "hamming_window", "load", "set_default_device", "get_device_module", "sparse_compressed_tensor",
    "asarray",
)
TENSOR_METHODS = ("new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor", "new_zeros", "to",
                  "pin_memory")
DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id", "pin_memory_device")


def _npu_string(value: str) -> str:
    return value.replace("cuda", "npu")


def map_device(value):
    """``value`` with CUDA named as the npu (strings, torch.device, map_location dicts)."""
    import torch

    if isinstance(value, str):
        return _npu_string(value) if "cuda" in value else value
    if isinstance(value, torch.device):
        if value.type == "cuda":
            return torch.device("npu", value.index) if value.index is not None else torch.device("npu")
        return value
    if isinstance(value, dict):
        return {map_device(k): map_device(v) for k, v in value.items()}
    return value


def _map_args(args, kwargs):
    if args:
        args = tuple(map_device(a) if not isinstance(a, bool) else a for a in args)
    for key in DEVICE_KWARGS:
        if key in kwargs and kwargs[key] is not None:
            kwargs[key] = map_device(kwargs[key])
    return args, kwargs


def _wrap(fn):
    if getattr(fn, "_npu_migrate_cuda_on_npu", False):
        return fn

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        args, kwargs = _map_args(args, kwargs)
        return fn(*args, **kwargs)

    wrapped._npu_migrate_cuda_on_npu = True
    return wrapped


def _patch(owner, names) -> None:
    for name in names:
        fn = getattr(owner, name, None)
        if fn is not None:
            wrapped = _wrap(fn)
            setattr(owner, name, wrapped)
            _keep_scriptable(fn, wrapped)


def _keep_scriptable(original, wrapped) -> None:
    """TorchScript knows ``torch.tensor`` & co. as builtins by identity: a wrapper would
    make every scripted function that calls one fail to compile, and libraries fall back
    to another (differently rounding) path. The wrapper is registered as the same builtin."""
    try:
        from torch.jit import _builtins
    except ImportError:  # pragma: no cover - a private module; without it only scripting is affected
        return
    op = _builtins._find_builtin(original)
    if op is not None:
        _builtins._register_builtin(wrapped, op)


def _backend(value):
    if isinstance(value, str):
        return value.replace("nccl", "hccl").replace("cuda", "npu")
    return value


def _wrap_backend(fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if args:
            args = (_backend(args[0]), *args[1:])
        if "backend" in kwargs:
            kwargs["backend"] = _backend(kwargs["backend"])
        args, kwargs = _map_args(args, kwargs)
        return fn(*args, **kwargs)

    return wrapped


def _called_from_project(depth: int = 2) -> bool:
    """Whether the function that called the caller is the project's own code (a file
    under ``NPU_MIGRATE_VERIFY_ROOT``, the twin's copy, not an installed package): the
    code the migration rewrites. Libraries run unchanged in both twins and get the
    device's own answers, so they take the same paths in both."""
    root = os.environ.get("NPU_MIGRATE_VERIFY_ROOT")
    if not root:
        return False
    try:
        name = sys._getframe(depth).f_code.co_filename
    except ValueError:
        return False
    if name.startswith("<"):  # <string>, <frozen ...>: no file of the project
        return False
    path = os.path.realpath(name)
    return path.startswith(os.path.realpath(root) + os.sep) and "site-packages" not in path


#: The compute capability the reference's CUDA answers (a CUDA machine's; the NPU's is None).
CUDA_CAPABILITY = (8, 0)


class _CudaProperties:
    """The npu's device properties with the compute capability that
    ``get_device_capability`` answers (``major``/``minor``, which the NPU's lack): a
    script that reads ``get_device_properties(...).major`` on CUDA gets a CUDA answer."""

    major, minor = CUDA_CAPABILITY

    def __init__(self, properties):
        self._properties = properties

    def __getattr__(self, name):
        return getattr(self._properties, name)

    def __repr__(self) -> str:
        return repr(self._properties)


def install() -> None:
    import importlib

    import torch
    import torch.utils._device
    import torch_npu  # noqa: F401  (the emulated NPU: on PYTHONPATH in the reference twin)

    # torch's set of factory functions (what `with torch.device(...)` gives a device) is
    # cached by identity at its first use: fill it with the originals first, as
    # transfer_to_npu does
    torch.utils._device._device_constructors()
    npu = torch.npu
    cuda = torch.cuda
    # torch.cuda.X is torch.npu.X (device arguments mapped), as transfer_to_npu overlays torch.cuda
    for name in dir(npu):
        if name.startswith("_") or name in ("amp", "random", "torch", "os", "annotations", "time", "Any"):
            continue
        value = getattr(npu, name)
        if callable(value) and not isinstance(value, type):
            value = _wrap(value)
        setattr(cuda, name, value)
    cuda.get_device_capability = lambda device=None: CUDA_CAPABILITY
    npu_properties = cuda.get_device_properties

    def get_device_properties(*args, **kwargs):
        return _CudaProperties(npu_properties(*args, **kwargs))

    cuda.get_device_properties = get_device_properties
    cuda.is_bf16_supported = lambda *args, **kwargs: True
    original_device = npu.device

    class device(original_device):  # torch.cuda.device("cuda:1") / torch.cuda.device(1)
        def __init__(self, device):
            super().__init__(map_device(device))

    cuda.device = device
    for name in ("get_rng_state", "set_rng_state", "manual_seed", "manual_seed_all", "seed", "seed_all",
                 "initial_seed", "get_rng_state_all", "set_rng_state_all"):
        if hasattr(npu, name):
            setattr(cuda.random, name, getattr(cuda, name))
    # torch.cuda.amp.autocast / GradScaler derive from torch.amp's with "cuda": mapped below

    _patch(torch, FACTORIES)
    _patch(torch.Tensor, TENSOR_METHODS)
    _patch(torch.nn.Module, ("to", "to_empty"))
    _patch(torch.fft, ("fftfreq", "rfftfreq"))
    torch.Tensor.cuda = _wrap(torch.Tensor.npu)  # .cuda(device) with the cuda device mapped
    torch.Tensor.is_cuda = torch.Tensor.is_npu
    torch.nn.Module.cuda = _wrap(torch.nn.Module.npu)
    # the project's own calls get a CUDA machine's accelerator, cuda (mapped wherever it
    # is used as a device): `device = torch.accelerator.current_accelerator()` then
    # `if device.type == 'cuda': model.cuda(device)`, as pytorch/examples' imagenet does,
    # takes the CUDA branch the original takes; torch and the libraries keep the npu
    accelerator = importlib.import_module("torch.accelerator")
    npu_accelerator = accelerator.current_accelerator

    @functools.wraps(npu_accelerator)
    def current_accelerator(*args, **kwargs):
        found = npu_accelerator(*args, **kwargs)
        if found is not None and found.type == "npu" and _called_from_project():
            return torch.device("cuda")
        return found

    accelerator.current_accelerator = current_accelerator
    torch.UntypedStorage.__new__ = _wrap(torch.UntypedStorage.__new__)
    torch.utils._device.DeviceContext.__init__ = _wrap(torch.utils._device.DeviceContext.__init__)

    generator_base = torch.Generator

    class _GeneratorMeta(type(generator_base)):
        def __instancecheck__(cls, instance):
            return isinstance(instance, generator_base)

    class Generator(generator_base, metaclass=_GeneratorMeta):
        def __new__(cls, device="cpu"):
            return generator_base(map_device(device))

    torch.Generator = Generator

    # autocast and GradScaler on the device the original names ("cuda", GradScaler's default)
    autocast_cls = torch.amp.autocast_mode.autocast
    autocast_cls.__init__ = _wrap(autocast_cls.__init__)
    scaler_cls = torch.amp.GradScaler
    original_scaler_init = scaler_cls.__init__

    @functools.wraps(original_scaler_init)
    def scaler_init(self, device="cuda", *args, **kwargs):
        return original_scaler_init(self, map_device(device), *args, **kwargs)

    scaler_cls.__init__ = scaler_init

    def device_type_default(fn):
        @functools.wraps(fn)
        def wrapped(device_type=None, *args, **kwargs):
            if device_type is None:
                device_type = "npu"
            return fn(map_device(device_type), *args, **kwargs)

        return wrapped

    torch.is_autocast_enabled = device_type_default(torch.is_autocast_enabled)
    torch.get_autocast_dtype = _wrap(torch.get_autocast_dtype)
    torch.set_autocast_dtype = _wrap(torch.set_autocast_dtype)
    torch.get_autocast_gpu_dtype = lambda: torch.get_autocast_dtype("npu")
    torch.amp.custom_fwd = _wrap(torch.amp.custom_fwd)
    torch.amp.custom_bwd = _wrap(torch.amp.custom_bwd)

    from torch.utils.data import DataLoader

    DataLoader.__init__ = _wrap(DataLoader.__init__)
    importlib.import_module("torch._utils")._get_available_device_type = lambda: "npu"
    importlib.import_module("torch.nn.parallel.data_parallel")._get_available_device_type = lambda: "npu"

    import torch.distributed as dist

    if dist.is_available():
        dist.init_process_group = _wrap_backend(dist.init_process_group)
        c10d = importlib.import_module("torch.distributed.distributed_c10d")
        c10d.init_process_group = dist.init_process_group
        if hasattr(c10d, "_new_group_with_tag"):
            c10d._new_group_with_tag = _wrap_backend(c10d._new_group_with_tag)
        dist.is_nccl_available = lambda: True
        from torch.nn.parallel import DistributedDataParallel

        DistributedDataParallel.__init__ = _wrap(DistributedDataParallel.__init__)
        from npu_migrate.verify.lazy import FSDP_MODULE, after_import

        def fsdp(module):  # when it is imported: see lazy.after_import
            module.FullyShardedDataParallel.__init__ = _wrap(module.FullyShardedDataParallel.__init__)

        after_import(FSDP_MODULE, fsdp)
        try:
            mesh = importlib.import_module("torch.distributed.device_mesh")
            mesh.init_device_mesh = _wrap(mesh.init_device_mesh)
            dist.init_device_mesh = mesh.init_device_mesh
            mesh.DeviceMesh.__init__ = _wrap(mesh.DeviceMesh.__init__)
        except (ImportError, AttributeError):  # pragma: no cover
            pass
    os.environ.setdefault("NPU_MIGRATE_VERIFY_REFERENCE", "cuda-on-npu")
