"""The scan that decides the CPU path's stand-ins (``npu_migrate/python/imports.py``):
it sees ``"npu"`` behind calls nested in the arguments, and stays linear on any text."""

from __future__ import annotations

import pytest

from npu_migrate.python.imports import cpu_stand_ins, npu_device_type


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", [
    'with torch.random.fork_rng(devices=range(torch.npu.device_count()), device_type="npu"):\n    pass\n',
    'with torch.random.fork_rng(devices=[torch.npu.current_device()], device_type="npu"):\n    pass\n',
    'def f(device=torch.device("npu")):\n    pass\n',
])
def test_npu_as_a_device_type_is_seen_behind_nested_calls(code):
    assert npu_device_type() in cpu_stand_ins(code)


@pytest.mark.timeout(60)
def test_no_stand_in_for_calls_without_an_npu_argument():
    assert npu_device_type() not in cpu_stand_ins("torch.random.fork_rng(devices=range(torch.npu.device_count()))\n")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("unit", ["(x)", "(((", "((x))", '("', "device(", "a"])
def test_the_scan_is_linear_on_runs_of_brackets(unit):
    # two ways to read each "(x)" made this exponential in an intermediate version: 30
    # repetitions took minutes; 100,000 now take a fraction of a second
    cpu_stand_ins("torch.npu.x\ndevice(" + unit * 100_000)
