"""NPU011's message names what the NPU does at a kept CUDA test."""

from __future__ import annotations

from pathlib import Path

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

FIXTURE = Path(__file__).parents[2] / "fixtures" / "rules" / "NPU011" / "early_raise_before_kernel.unchanged.py"


def _gate_messages(source: bytes) -> list[str]:
    result = migrate_source("attn.py", source, Settings(selection=Selection.create(["ALL"])))
    return [f.message for f in result.findings if f.rule == "NPU011"]


def test_an_early_raise_is_called_a_raise():
    # InternVL's flash_attn_with_sink.py shape: the kept CUDA test raises on NPU
    messages = _gate_messages(FIXTURE.read_bytes())
    # (a test whose only body raises an error naming CUDA is a CUDA-only requirement:
    # npu_migrate/python/cuda_backend.py words it so; either way the message says it raises)
    assert messages and all("raise" in m and "return" not in m for m in messages), messages


def test_an_early_return_is_called_a_return():
    source = FIXTURE.read_bytes().replace(b'raise RuntimeError(f"this kernel needs a CUDA tensor, got {q.device}")',
                                          b"return None")
    messages = _gate_messages(source)
    assert messages and all("early `return`" in m for m in messages), messages
