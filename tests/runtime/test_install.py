"""install(): idempotent, cheap, translates launcher variables, never creates a group."""

import importlib

import pytest
import torch
import torch.distributed as dist
from npu_runtime import devices, init_distributed
from npu_runtime import ranktable as R
from npu_runtime import watchdog as wd_mod
from npu_runtime.errors import RanktableError

from ._helpers import write_ranktable_v1

install_mod = importlib.import_module("npu_runtime.install")

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


def test_idempotent_and_starts_watchdog():
    env = {"NPU_RUNTIME_WATCHDOG_TIMEOUT": "30"}
    rep = install(environ=env)
    assert install(environ={"RANK": "garbage"}) is rep  # a second call does nothing
    assert rep.watchdog is wd_mod.active() and rep.watchdog.timeout_s == 30
    assert rep.source == "single" and rep.exported == {} and rep.note is None


@pytest.mark.parametrize("value", ["abc", "-5", "\u00b2", "1.5"])
def test_bad_hccl_exec_timeout_is_reported_not_raised(value):
    rep = install(environ={"HCCL_EXEC_TIMEOUT": value, "NPU_RUNTIME_WATCHDOG": "0"})
    assert f"HCCL_EXEC_TIMEOUT={value!r}" in rep.note


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_bad_watchdog_timeout_is_reported_and_the_default_used(value):
    rep = install(environ={"NPU_RUNTIME_WATCHDOG_TIMEOUT": value})
    assert f"NPU_RUNTIME_WATCHDOG_TIMEOUT={value!r}" in rep.note
    assert rep.watchdog is wd_mod.active() and rep.watchdog.timeout_s == 1896


def test_bad_ranktable_timeout_is_reported_not_raised(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("127.0.0.1", [0, 1])])
    rep = install(environ={"RANK_TABLE_FILE": str(path), "RANK_ID": "0", "RANK_SIZE": "2",
                           "NPU_RUNTIME_RANKTABLE_TIMEOUT": "abc", "NPU_RUNTIME_WATCHDOG": "0"})
    assert "NPU_RUNTIME_RANKTABLE_TIMEOUT='abc'" in rep.note


def test_install_and_init_distributed_share_one_ranktable_wait(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(R, "_monotonic", lambda: clock[0])
    monkeypatch.setattr(R, "_sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    env = {"RANK_TABLE_FILE": str(tmp_path / "never.json"), "RANK_ID": "0", "RANK_SIZE": "2",
           "NPU_RUNTIME_HOST_IP": "127.0.0.1", "NPU_RUNTIME_WATCHDOG": "0"}
    rep = install(environ=env)
    assert "does not exist after waiting 300 s" in rep.note
    waited = clock[0] - 1000.0
    assert 300 <= waited < 301
    with pytest.raises(RanktableError, match="does not exist"):
        init_distributed(environ=env)
    assert clock[0] - 1000.0 - waited < 1  # no second 300 s wait


class _FakeAccelerator:
    def __init__(self, count):
        self.count, self.current = count, None

    def device_count(self):
        return self.count

    def set_device(self, index):
        self.current = index


def test_install_sets_the_rank_device_when_the_job_has_several_ranks(monkeypatch):
    fake = _FakeAccelerator(8)
    monkeypatch.setattr(devices, "accelerator_type", lambda: "cuda")
    monkeypatch.setattr(devices, "module_for", lambda device_type: fake)
    env = {"RANK": "1", "LOCAL_RANK": "{2,3}", "WORLD_SIZE": "4", "MASTER_ADDR": "m", "NPU_RUNTIME_WATCHDOG": "0"}
    rep = install(environ=env, local_rank=1)  # node 1, slot 1: rank 3 on device 3
    assert (env["RANK"], env["LOCAL_RANK"]) == ("3", "1")
    assert rep.device == torch.device("cuda", 3) and fake.current == 3


def test_install_leaves_the_device_alone_for_a_world_of_one(monkeypatch):
    fake = _FakeAccelerator(8)
    monkeypatch.setattr(devices, "accelerator_type", lambda: "cuda")
    monkeypatch.setattr(devices, "module_for", lambda device_type: fake)
    rep = install(environ={"NPU_RUNTIME_WATCHDOG": "0"})
    assert rep.device is None and fake.current is None


def test_a_rank_without_a_device_is_reported_not_raised(monkeypatch):
    fake = _FakeAccelerator(2)
    monkeypatch.setattr(devices, "accelerator_type", lambda: "cuda")
    monkeypatch.setattr(devices, "module_for", lambda device_type: fake)
    env = {"RANK": "5", "LOCAL_RANK": "5", "WORLD_SIZE": "8", "MASTER_ADDR": "m", "MASTER_PORT": "1",
           "NPU_RUNTIME_WATCHDOG": "0"}
    rep = install(environ=env)
    assert "local rank 5" in rep.note and "only 2 visible" in rep.note and fake.current is None


def test_the_migrated_codes_cpu_stand_in_for_torch_npu_is_not_an_npu(monkeypatch):
    """npu-migrate's import guard sets ``torch.npu = torch.cuda`` where torch_npu is
    missing; the runtime must not take that for an NPU (on an NVIDIA machine it would
    then pick HCCL), nor lose CUDA itself."""
    monkeypatch.setattr(torch, "npu", torch.cuda, raising=False)
    assert devices.module_for("npu") is None
    assert not devices.is_available("npu")
    assert devices.module_for("cuda") is torch.cuda
    assert devices.accelerator_type() in (None, "cuda")
