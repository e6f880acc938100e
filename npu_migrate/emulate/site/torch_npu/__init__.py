"""Stand-in ``torch_npu`` of npu-migrate's emulated NPU.

Importable only when ``npu-migrate emulate`` (or the test harness) puts its
directory on the path. Importing it registers a PrivateUse1 device named
``npu`` backed by host memory, ``torch.npu``, the ``Tensor``/``Module``
``.npu()`` methods and the ``hccl`` process-group backend. Fused
``torch_npu.npu_*`` kernels are not emulated and raise NotImplementedError.
"""

from __future__ import annotations

import os

import torch

from npu_migrate.emulate import build as _build

__version__ = "2.13.0+npu_migrate.emulated"
EMULATED = True

_build.load()

if torch._C._get_privateuse1_backend_name() != "npu":
    torch.utils.rename_privateuse1_backend("npu")

from . import npu  # noqa: E402
from . import _hccl, _rnn  # noqa: E402

torch._register_device_module("npu", npu)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)
_hccl.register()
_rnn.register()


def _configure_strict() -> None:
    strict = os.environ.get("NPU_MIGRATE_EMULATOR_STRICT", "").strip().lower() in {"1", "true", "yes", "on"}
    deny = [
        op.strip()
        for op in os.environ.get("NPU_MIGRATE_EMULATOR_DENY_OPS", "").replace(";", ",").split(",")
        if op.strip()
    ]
    torch.ops.npu_emu.set_strict(strict, deny if strict else [])


_configure_strict()


def set_strict(enabled: bool, deny_ops=()) -> None:
    """Switch strict mode at run time (no float64 on npu; *deny_ops* raise NotImplementedError)."""
    torch.ops.npu_emu.set_strict(bool(enabled), list(deny_ops) if enabled else [])


def fallback_calls() -> int:
    """How many op calls have gone through the CPU fallback so far (a rough coverage signal)."""
    return int(torch.ops.npu_emu.fallback_calls())


def __getattr__(name: str):
    if name.startswith("npu_") or name in {"optim", "contrib", "profiler", "utils", "onnx", "op_plugin"}:
        raise NotImplementedError(
            f"torch_npu.{name} is not emulated by the npu-migrate emulated NPU "
            "(npu-migrate emulate): fused Ascend kernels and vendor extras only run on "
            "real hardware."
        )
    raise AttributeError(f"module 'torch_npu' has no attribute '{name}'")


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: like the real torch_npu, the
    emulated one is loaded by ``import torch`` (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off)."""
