"""Hostile environment values (issue 29 item 2): install() never raises, init_distributed()
raises LaunchError naming the variable, and nothing takes long."""

import importlib
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from npu_runtime import bounds, init_distributed
from npu_runtime import watchdog as wd_mod
from npu_runtime.errors import LaunchError

from ._helpers import write_ranktable_v1

install_mod = importlib.import_module("npu_runtime.install")
HUGE = "9" * 5000


@pytest.fixture(autouse=True)
def fresh():
    install_mod._reset_for_tests()
    yield
    install_mod._reset_for_tests()


TORCHRUN = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
MODELARTS = {"MA_NUM_HOSTS": "1", "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "1"}

CASES = [
    ("RANK", TORCHRUN), ("WORLD_SIZE", TORCHRUN), ("LOCAL_RANK", TORCHRUN), ("MASTER_PORT", TORCHRUN),
    ("LOCAL_WORLD_SIZE", TORCHRUN), ("GROUP_RANK", TORCHRUN),
    ("MA_NUM_GPUS", MODELARTS), ("VC_TASK_INDEX", MODELARTS), ("MA_NUM_HOSTS", MODELARTS),
]


@pytest.mark.parametrize("value", [HUGE, "1" * 13, "\u0663", "1_0", "+-1", "0x10"])
@pytest.mark.parametrize(("name", "base"), CASES, ids=[c[0] for c in CASES])
def test_hostile_integer_variables(name, base, value):
    env = {**base, name: value, "NPU_RUNTIME_WATCHDOG": "0"}
    report = install_mod.install(environ=dict(env))
    assert report.note and name in report.note
    with pytest.raises(LaunchError, match=name):
        init_distributed(environ=dict(env))


@pytest.mark.parametrize("field", ["rank_id", "device_id"])
def test_hostile_ranktable_integers(tmp_path, field):
    path = write_ranktable_v1(tmp_path / "rt.json", [("127.0.0.1", [0, 1])])
    doc = json.loads(path.read_text())
    doc["server_list"][0]["device"][1][field] = HUGE
    path.write_text(json.dumps(doc))
    env = {"RANK_TABLE_FILE": str(path), "RANK_ID": "0", "RANK_SIZE": "2", "NPU_RUNTIME_HOST_IP": "127.0.0.1",
           "NPU_RUNTIME_WATCHDOG": "0", "NPU_RUNTIME_RANKTABLE_TIMEOUT": "0"}
    report = install_mod.install(environ=dict(env))
    assert report.note and field in report.note
    with pytest.raises(LaunchError, match=field):
        init_distributed(environ=dict(env))


def test_huge_hccl_exec_timeout_is_reported_and_the_watchdog_default_used():
    report = install_mod.install(environ={"HCCL_EXEC_TIMEOUT": HUGE})
    assert "HCCL_EXEC_TIMEOUT" in report.note
    assert report.watchdog is wd_mod.active() and report.watchdog.timeout_s == 1896


def test_host_ip_list_is_bounded(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("127.0.0.1", [0, 1])])
    env = {"RANK_TABLE_FILE": str(path), "RANK_ID": "0", "RANK_SIZE": "2", "NPU_RUNTIME_WATCHDOG": "0",
           "NPU_RUNTIME_HOST_IP": ",".join(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}" for i in range(100_000))}
    install_mod.install(environ={"NPU_RUNTIME_WATCHDOG": "0"})  # first-time imports, outside the clock
    install_mod._reset_for_tests()
    start = time.monotonic()
    report = install_mod.install(environ=dict(env))
    assert "NPU_RUNTIME_HOST_IP" in report.note
    with pytest.raises(LaunchError, match="NPU_RUNTIME_HOST_IP"):
        init_distributed(environ=dict(env))
    assert time.monotonic() - start < 2


def test_local_rank_list_is_bounded():
    env = {"RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "{" + ",".join(["0"] * 100_000) + "}",
           "MASTER_ADDR": "127.0.0.1", "NPU_RUNTIME_WATCHDOG": "0"}
    install_mod.install(environ={"NPU_RUNTIME_WATCHDOG": "0"})  # first-time imports, outside the clock
    install_mod._reset_for_tests()
    start = time.monotonic()
    report = install_mod.install(environ=dict(env))
    assert "LOCAL_RANK" in report.note
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("value", ["1e10", "1e300", "9" * 60])
def test_huge_watchdog_timeouts_are_clamped_not_overflowing(value):
    report = install_mod.install(environ={"NPU_RUNTIME_WATCHDOG_TIMEOUT": value,
                                          "NPU_RUNTIME_WATCHDOG_FIRST_STEP_TIMEOUT": value})
    wd = report.watchdog
    assert wd is not None and report.note is None
    assert wd.timeout_s == wd.first_step_timeout_s == wd_mod.MAX_TIMEOUT_S


def test_a_direct_huge_timeout_is_clamped_too():
    wd = wd_mod.Watchdog(1e10, grace_s=1e12, first_step_timeout_s=1e15)
    assert (wd.timeout_s, wd.grace_s, wd.first_step_timeout_s) == (wd_mod.MAX_TIMEOUT_S,) * 3
    wd.interval_s = 0.02  # check often: the checker arms the backstop on its first rounds
    with wd:
        time.sleep(0.3)
        assert wd._thread.is_alive()  # it did not die of OverflowError
    wd = wd_mod.Watchdog(wd_mod.MAX_TIMEOUT_S * 0.9, grace_s=wd_mod.MAX_TIMEOUT_S * 0.9)
    wd.interval_s = 0.02  # deadline beyond the clamp: the backstop waits instead of overflowing
    with wd:
        time.sleep(0.3)
        assert wd._thread.is_alive()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40) | st.integers().map(str) | st.just(HUGE))
def test_bounded_int_returns_an_int_in_range_or_names_the_variable(raw):
    try:
        value = bounds.bounded_int(raw, "SOME_VAR", minimum=0, maximum=1000)
    except bounds.BoundError as exc:
        assert "SOME_VAR" in str(exc)
    else:
        assert value is None or (type(value) is int and 0 <= value <= 1000)
