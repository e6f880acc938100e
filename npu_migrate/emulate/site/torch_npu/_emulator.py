"""Controls of the emulated NPU itself (not part of the real torch_npu API)."""

from __future__ import annotations

import os

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


def fallback_calls() -> int:
    """How many op calls have gone through the CPU fallback so far (a rough coverage signal)."""
    return int(torch.ops.npu_emu.fallback_calls())


_names: frozenset[str] | None = None


def torch_npu_names() -> frozenset[str]:
    global _names
    if _names is None:
        _names = api_table_names("torch_npu") or frozenset(
            {"optim", "contrib", "profiler", "utils", "onnx", "op_plugin"}
        )
    return _names
