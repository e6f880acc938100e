"""Controls of the emulated NPU itself (not part of the real torch_npu API)."""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager

import torch

from npu_migrate.emulate.api_names import api_table_names

EMULATED = True
_TRUE = {"1", "true", "yes", "on"}


def configure_strict_from_env() -> None:
    strict = os.environ.get("NPU_MIGRATE_EMULATOR_STRICT", "").strip().lower() in _TRUE
    deny = (
        os.environ.get("NPU_MIGRATE_EMULATOR_DENY_OPS", "").replace(";", ",").split(",")
    )
    set_strict(strict, [op.strip() for op in deny if op.strip()])


def set_strict(enabled: bool, deny_ops=()) -> None:
    """Switch strict mode (no float64 on npu; *deny_ops* raise NotImplementedError)."""
    torch.ops.npu_emu.set_strict(bool(enabled), list(deny_ops) if enabled else [])


@contextmanager
def float64_allowed():
    """Let the calling thread create float64 on npu under strict mode (library code only)."""
    torch.ops.npu_emu.float64_exempt(True)
    try:
        yield
    finally:
        torch.ops.npu_emu.float64_exempt(False)


def _exempt(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with float64_allowed():
            return function(*args, **kwargs)

    wrapper.__npu_migrate_float64_exempt__ = True
    return wrapper


def _exempt_unscale(cls) -> None:
    method = cls.__dict__.get("unscale_")
    if method is not None and not getattr(method, "__npu_migrate_float64_exempt__", False):
        cls.unscale_ = _exempt(method)


def exempt_library_float64() -> None:
    """Strict mode rejects the user's float64, not torch's own.

    ``GradScaler.unscale_`` (also reached from ``GradScaler.step``) computes
    the inverse scale as ``scale.double().reciprocal().float()`` on the
    scale's device, and so does FSDP's ``ShardedGradScaler.unscale_``; Ascend
    runs that, and a user cannot change it. Subclasses defined later (FSDP's,
    a library's) are covered when they are created.
    """
    base = torch.amp.grad_scaler.GradScaler
    pending = [base]
    while pending:
        cls = pending.pop()
        _exempt_unscale(cls)
        pending.extend(cls.__subclasses__())
    if "__npu_migrate_float64_exempt__" not in base.__dict__:
        previous = base.__dict__.get("__init_subclass__")

        def __init_subclass__(cls, **kwargs):
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            _exempt_unscale(cls)

        base.__init_subclass__ = classmethod(__init_subclass__)
        base.__npu_migrate_float64_exempt__ = True


def fallback_calls() -> int:
    """How many op calls have gone through the CPU fallback so far (a rough coverage signal)."""
    return int(torch.ops.npu_emu.fallback_calls())


_names: frozenset[str] | None = None
_has_table: bool | None = None


def has_api_table() -> bool:
    """Whether npu_migrate ships the torch_npu name table (else every npu_* name is accepted)."""
    torch_npu_names()
    return bool(_has_table)


def torch_npu_names() -> frozenset[str]:
    global _names, _has_table
    if _names is None:
        table = api_table_names("torch_npu")
        _has_table = table is not None
        _names = table or frozenset(
            {"optim", "contrib", "profiler", "utils", "onnx", "op_plugin"}
        )
    return _names
