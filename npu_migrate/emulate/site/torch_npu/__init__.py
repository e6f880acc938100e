"""Stand-in ``torch_npu`` of npu-migrate's emulated NPU.

Importable only when ``npu-migrate emulate`` (or the test harness) puts its
directory on the path. Importing it registers a PrivateUse1 device named
``npu`` backed by host memory, ``torch.npu``, the ``Tensor``/``Module``
``.npu()`` methods and the ``hccl`` process-group backend. Fused
``torch_npu.npu_*`` kernels are not emulated: they import, and raise
NotImplementedError when called.
"""

from __future__ import annotations

import torch

from npu_migrate.emulate import build as _build
from npu_migrate.emulate.api_names import unimplemented

__version__ = "2.13.0+npu_migrate.emulated"

_build.load()

if torch._C._get_privateuse1_backend_name() != "npu":
    torch.utils.rename_privateuse1_backend("npu")

from . import _dataloader, _emulator, _hccl, _rnn, _shutdown, _syncbn, npu
from . import (
    profiler as profiler,  # torch_npu imports it too: torch_npu.profiler.profile works
)

torch._register_device_module("npu", npu)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)
_hccl.register()
_rnn.register()
_syncbn.register()
_dataloader.install()


_emulator.configure_strict_from_env()
_emulator.exempt_library_float64()


_shutdown.install()


def __getattr__(name: str):
    table = _emulator.torch_npu_names()
    if name.startswith("npu_") and (name in table or not _emulator.has_api_table()):
        # Fused Ascend kernels import as on hardware (transformers runs
        # `from torch_npu import npu_fusion_attention` at import time) and
        # raise only when called.
        kernel = unimplemented(f"torch_npu.{name}")
        globals()[name] = kernel
        return kernel
    if name in table:
        raise NotImplementedError(
            f"torch_npu.{name} is not emulated by the npu-migrate emulated NPU "
            "(npu-migrate emulate): fused Ascend kernels and vendor extras only run on "
            "real hardware."
        )
    raise AttributeError(f"module 'torch_npu' has no attribute '{name}'")


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: like the real torch_npu, the
    emulated one is loaded by ``import torch`` (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off)."""
