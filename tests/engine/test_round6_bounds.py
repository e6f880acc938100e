"""Bounds found by adversarial round 6 (issue 38): NPU850 on a dependency file of torch
pins (each a bounded run; within the 2,000-entry bound the old code compared every torch
pin with every other one: 9 s for 2,000 pins, 15 s with markers)."""

from __future__ import annotations

import time

import pytest

from npu_migrate.deps import engine as deps_engine
from npu_migrate.pipeline.settings import Settings


def _pins(n: int) -> bytes:
    return b"".join(b'torch==2.1.0 ; python_version > "3.%d"\n' % i for i in range(n))


@pytest.mark.timeout(120)
def test_npu850_reads_each_entrys_markers_once(monkeypatch):
    import importlib

    rule = importlib.import_module("npu_migrate.rules.deps.npu850_torch_npu_requirement")
    calls = []
    real = rule._marker
    monkeypatch.setattr(rule, "_marker", lambda entry: calls.append(1) or real(entry))
    result = deps_engine.migrate("requirements.txt", _pins(300), Settings())
    assert sum(f.rule == "NPU850" for f in result.findings) == 300
    assert len(calls) <= 300, len(calls)  # the old code: 2 per pair of pins, 180,000


@pytest.mark.timeout(120)
def test_npu850_time_per_megabyte_of_torch_pins():
    """The most entries a dependency file may hold (2,000), every one a torch pin with
    markers: at most 60 s per MB (measured 10 s/MB here; the old code 180 s/MB)."""
    data = _pins(deps_engine.MAX_ENTRIES - 10)
    started = time.perf_counter()
    result = deps_engine.migrate("requirements.txt", data, Settings())
    seconds = time.perf_counter() - started
    assert result.error is None and len(result.findings) >= deps_engine.MAX_ENTRIES - 10
    assert seconds / (len(data) / (1 << 20)) < 60, f"{seconds:.1f} s for {len(data):,} bytes"
