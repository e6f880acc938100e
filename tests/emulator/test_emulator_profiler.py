"""The emulated torch_npu.profiler: torch_npu's API and schedule, torch's CPU trace."""

from __future__ import annotations

import pytest

from .conftest import SCRIPTS, json_report, run_emulated

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def profiler(emulator_build) -> dict:
    return json_report(run_emulated(SCRIPTS / "probe_profiler.py"))


def test_schedule_cycles_like_torch_profiler(profiler):
    assert profiler["schedule_mismatches"] == []


def test_traces_are_ready_at_the_steps_torch_profiler_gives(profiler):
    assert profiler["ready"] == profiler["ref_ready"] == [4, 8]


def test_one_ascend_directory_per_trace(profiler):
    assert profiler["spans"] == [True] * profiler["ref_traces"] == [True, True]
    assert profiler["trace_views"] == [True, True]
    assert profiler["plain_spans"] == [True]


def test_the_trace_holds_the_recorded_steps_and_ops(profiler):
    # schedule(wait=1, warmup=1, active=2): the first trace records steps 2 and 3
    assert profiler["step_ranges_in_trace"] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert profiler["linear_in_trace"]


def test_export_stacks_takes_the_npu_metric(profiler):
    assert profiler["export_stacks"]["ok"], profiler["export_stacks"]
    assert profiler["stacks_written"]  # (torch 2.13's CPU-only Kineto leaves it empty)


def test_no_torch_profiler_only_api(profiler):
    assert profiler["key_averages"] is False and profiler["events"] is False
    assert profiler["activities"] == ["CPU", "NPU"]
    assert profiler["torch_activity"]["ok"] is False and profiler["torch_activity"]["type"] == "TypeError"


def test_experimental_config_and_import_forms(profiler):
    assert profiler["experimental_config"] == {"ok": True, "value": "profile"}
    assert profiler["import_form"] == {"ok": True, "value": "profile"}
