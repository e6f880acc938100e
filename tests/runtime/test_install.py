"""install(): idempotent, cheap, translates launcher variables, never creates a group."""

import importlib
import time

import pytest
import torch.distributed as dist

from ._helpers import write_ranktable_v1

install_mod = importlib.import_module("npu_runtime.install")
from npu_runtime import watchdog as wd_mod

install = install_mod.install


@pytest.fixture(autouse=True)
def fresh():
    install_mod._reset_for_tests()
    yield
    install_mod._reset_for_tests()


def test_ranktable_variables_become_torchrun_variables(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("127.0.0.1", [0, 1]), ("10.0.0.2", [0, 1])])
    env = {"RANK_TABLE_FILE": str(path), "RANK_ID": "1", "RANK_SIZE": "4", "NPU_RUNTIME_HOST_IP": "127.0.0.1",
           "NPU_RUNTIME_WATCHDOG": "0"}
    rep = install(environ=env)
    assert rep.source == "ranktable" and rep.watchdog is None
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                "MASTER_PORT")} == {
        "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert env["HCCL_CONNECT_TIMEOUT"] == "300"
    assert not dist.is_initialized()


def test_user_hccl_values_are_never_overridden(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("127.0.0.1", [0])])
    env = {"RANK_TABLE_FILE": str(path), "RANK_ID": "0", "RANK_SIZE": "1", "HCCL_CONNECT_TIMEOUT": "600",
           "NPU_RUNTIME_WATCHDOG": "0", "NPU_RUNTIME_HOST_IP": "127.0.0.1"}
    rep = install(environ=env)
    assert env["HCCL_CONNECT_TIMEOUT"] == "600" and rep.hccl_defaults == {}
    assert "RANK" not in env  # a world of one stays a plain single-process run


def test_ascend_operator_rank_is_rewritten_and_original_kept():
    env = {"RANK": "1", "LOCAL_RANK": "{3}", "WORLD_SIZE": "2", "MASTER_ADDR": "m", "MASTER_PORT": "2222",
           "NPU_RUNTIME_WATCHDOG": "0"}
    install(environ=env)
    assert (env["RANK"], env["LOCAL_RANK"], env["NPU_RUNTIME_ORIGINAL_LOCAL_RANK"]) == ("1", "0", "{3}")
    assert env["ASCEND_DEVICE_ID"] == "3"


def test_unresolvable_node_launch_leaves_env_and_explains():
    env = {"RANK": "0", "LOCAL_RANK": "{0,1,2,3}", "WORLD_SIZE": "8", "MASTER_ADDR": "m",
           "NPU_RUNTIME_WATCHDOG": "0"}
    before = dict(env)
    rep = install(environ=env)
    assert env == before and "slot is unknown" in rep.note


def test_bad_environment_is_reported_not_raised():
    env = {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "5", "NPU_RUNTIME_WATCHDOG": "0"}
    rep = install(environ=env)
    assert "VC_TASK_INDEX=5" in rep.note


def test_idempotent_and_cheap_and_starts_watchdog():
    env = {"NPU_RUNTIME_WATCHDOG_TIMEOUT": "30"}
    t0 = time.perf_counter()
    rep = install(environ=env)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert install(environ={"RANK": "garbage"}) is rep
    second = time.perf_counter() - t0
    assert rep.watchdog is wd_mod.active() and rep.watchdog.timeout_s == 30
    assert rep.source == "single" and rep.exported == {}
    assert second < 1e-3 and first < 2.0  # torch already imported by the test session
