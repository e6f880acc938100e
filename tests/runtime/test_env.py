"""Launcher resolution over synthetic environments (pure, no processes)."""

import concurrent.futures
import json
import logging
import os
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from npu_runtime import env as E
from npu_runtime import ranktable as R
from npu_runtime.errors import LaunchError, RanktableError

from ._helpers import write_ranktable_legacy, write_ranktable_v1


def test_single_process_when_nothing_is_set():
    spec = E.resolve({})
    assert (spec.source, spec.rank, spec.world_size, spec.local_rank) == (E.SINGLE, 0, 1, 0)


def test_torchrun_variables():
    spec = E.resolve({"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
                      "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400"})
    assert (spec.source, spec.rank, spec.local_rank, spec.world_size, spec.local_world_size, spec.node_rank) == (
        E.TORCHRUN, 5, 1, 8, 4, 1)
    assert (spec.master_addr, spec.master_port) == ("10.0.0.1", 29400)


def test_torchrun_wins_over_ranktable_and_modelarts_variables(tmp_path):
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1",
           "RANK_TABLE_FILE": str(tmp_path / "missing.json"), "RANK_ID": "1", "RANK_SIZE": "2",
           "MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1"}
    assert E.resolve(env).source == E.TORCHRUN


@pytest.mark.parametrize("env, needle", [
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x'"),
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}, "MASTER_ADDR"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "MASTER_PORT"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "99999"}, "MASTER_PORT"),
    ({"RANK": "0"}, "WORLD_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "abc", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "LOCAL_RANK"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK"),
])
def test_torchrun_errors_name_the_variable(env, needle):
    with pytest.raises(LaunchError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        E.resolve(env)


def test_world_of_one_needs_no_master():
    spec = E.resolve({"RANK": "0", "WORLD_SIZE": "1"})
    assert spec.world_size == 1 and spec.master_addr is None


@given(world=st.integers(1, 64), data=st.data())
def test_torchrun_roundtrip_property(world, data):
    rank = data.draw(st.integers(0, world - 1))
    env = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "a", "MASTER_PORT": "2"}
    spec = E.resolve(env)
    assert spec.rank == rank and spec.world_size == world
    # The exported torchrun view resolves to the same spec.
    assert E.resolve(E.torchrun_env(spec)) == spec


def test_ascend_operator_node_rank_and_local_list():
    env = {"RANK": "1", "LOCAL_RANK": "{0,1,2,3}", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4",
           "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "2222"}
    node = E.resolve(env)
    assert node.source == E.ASCEND_OPERATOR and not node.resolved and node.node_rank == 1
    spec = E.resolve(env, local_rank=2)
    assert (spec.rank, spec.local_rank, spec.world_size, spec.device_id) == (6, 2, 8, 2)
    assert E.torchrun_env(spec)["RANK"] == "6"
    with pytest.raises(LaunchError, match="local_rank=4"):
        E.resolve(env, local_rank=4)


def test_ascend_operator_single_device_per_node_resolves_itself():
    spec = E.resolve({"RANK": "3", "LOCAL_RANK": "{5}", "WORLD_SIZE": "4", "MASTER_ADDR": "m"})
    assert (spec.rank, spec.local_rank, spec.device_id, spec.master_port) == (3, 0, 5, 2222)


def test_ascend_operator_inconsistent():
    with pytest.raises(LaunchError, match="LOCAL_WORLD_SIZE=2"):
        E.resolve({"RANK": "0", "LOCAL_RANK": "{0,1,2,3}", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "2",
                   "MASTER_ADDR": "m"})
    with pytest.raises(LaunchError, match="RANK=2"):
        E.resolve({"RANK": "2", "LOCAL_RANK": "[0,1]", "WORLD_SIZE": "4", "MASTER_ADDR": "m"})


def test_modelarts():
    env = {"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "1", "MA_NUM_GPUS": "1",
           "VC_WORKER_HOSTS": "job-worker-0.svc,job-worker-1.svc"}
    spec = E.resolve(env)
    assert (spec.source, spec.rank, spec.world_size, spec.master_addr, spec.master_port) == (
        E.MODELARTS, 1, 2, "job-worker-0.svc", E.DEFAULT_MASTER_PORT)
    multi = dict(env, MA_NUM_GPUS="8")
    assert not E.resolve(multi).resolved
    assert E.resolve(multi, local_rank=3).rank == 11


def test_plain_volcano_job_env_and_svc_plugins():
    # No MA_NUM_HOSTS outside ModelArts: the svc plugin's VC_WORKER_NUM / VC_WORKER_HOSTS count the nodes.
    env = {"VC_TASK_INDEX": "1", "VK_TASK_INDEX": "1", "VC_WORKER_NUM": "2",
           "VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job"}
    spec = E.resolve(env)
    assert (spec.source, spec.rank, spec.world_size, spec.node_rank, spec.master_addr) == (
        E.MODELARTS, 1, 2, 1, "job-worker-0.job")
    no_count = {k: v for k, v in env.items() if k != "VC_WORKER_NUM"}
    assert E.resolve(no_count).world_size == 2
    with pytest.raises(LaunchError, match="VC_WORKER_HOSTS lists 2 hosts but VC_WORKER_NUM=3"):
        E.resolve(dict(env, VC_WORKER_NUM="3"))


@pytest.mark.parametrize("env, needle", [
    ({"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "2", "VC_WORKER_HOSTS": "a,b"}, "VC_TASK_INDEX=2"),
    ({"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": "0"}, "VC_WORKER_HOSTS is not set"),
    ({"MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "0", "VC_WORKER_HOSTS": "a,b"}, "lists 2 hosts"),
    ({"MA_NUM_HOSTS": "two", "VC_TASK_INDEX": "0"}, "MA_NUM_HOSTS='two'"),
])
def test_modelarts_errors(env, needle):
    with pytest.raises(LaunchError, match=needle):
        E.resolve(env)


def _rt_env(path, rank, size, dev=None):
    env = {"RANK_TABLE_FILE": str(path), "RANK_ID": str(rank), "RANK_SIZE": str(size)}
    if dev is not None:
        env["ASCEND_DEVICE_ID"] = str(dev)
    return env


@pytest.mark.parametrize("writer", [write_ranktable_v1, write_ranktable_legacy])
def test_ranktable_mode_both_formats(tmp_path, writer):
    path = writer(tmp_path / "rt.json", [("10.0.0.1", [0, 1]), ("10.0.0.2", [4, 5])])
    spec = E.resolve(_rt_env(path, 3, 4, dev=5), host_ids=["10.0.0.2"])
    assert (spec.source, spec.rank, spec.local_rank, spec.local_world_size, spec.node_rank, spec.device_id) == (
        E.RANKTABLE, 3, 1, 2, 1, 5)
    assert spec.master_addr == "10.0.0.1" and spec.master_port == E.DEFAULT_MASTER_PORT


def test_ranktable_directory_holds_jobstart_hccl(tmp_path):
    write_ranktable_v1(tmp_path / "jobstart_hccl.json", [("127.0.0.1", [0, 1])])
    spec = E.resolve(_rt_env(tmp_path, 1, 2), host_ids=["127.0.0.1"])
    assert spec.ranktable == str(tmp_path / "jobstart_hccl.json") and spec.device_id == 1


def test_ranktable_without_this_host(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("10.0.0.1", [0]), ("10.0.0.2", [0])])
    with pytest.raises(LaunchError, match=r"rt.json: no server_id/host_ip matches this host"):
        E.resolve(_rt_env(path, 0, 2), host_ids=["10.9.9.9"])
    with pytest.raises(LaunchError, match="RANK_ID=1 is on server 10.0.0.2"):
        E.resolve(_rt_env(path, 1, 2), host_ids=["10.0.0.1"])


def test_ranktable_inconsistencies(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("h", [0, 1])])
    with pytest.raises(LaunchError, match="RANK_SIZE=4 but ranktable .*rt.json lists 2 devices"):
        E.resolve(_rt_env(path, 0, 4), host_ids=["h"])
    with pytest.raises(LaunchError, match="ASCEND_DEVICE_ID=0 but ranktable"):
        E.resolve(_rt_env(path, 1, 2, dev=0), host_ids=["h"])
    with pytest.raises(LaunchError, match="RANK_ID=2 is not below RANK_SIZE=2"):
        E.resolve(_rt_env(path, 2, 2), host_ids=["h"])


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["server_list"][0]["device"][1].pop("rank_id"), r"server_list\[0\].device\[1\].rank_id"),
    (lambda d: d["server_list"][0]["device"][0].update(device_id="x"), r"server_list\[0\].device\[0\].device_id"),
    (lambda d: d["server_list"][0]["device"][1].update(rank_id="0"), "duplicate rank_id"),
    (lambda d: d.update(server_count="3"), "server_count is 3"),
    (lambda d: d["server_list"][0].pop("server_id"), r"server_list\[0\].server_id"),
    (lambda d: d.pop("server_list"), "neither server_list"),
])
def test_malformed_ranktable_names_the_field(tmp_path, mutate, needle):
    path = write_ranktable_v1(tmp_path / "rt.json", [("h", [0, 1])])
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(RanktableError, match=needle):
        R.load(str(path), timeout_s=0)


def test_ranktable_waits_for_completed(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("h", [0])], status="initializing")

    def finish():
        time.sleep(0.4)
        write_ranktable_v1(tmp_path / "rt.json", [("h", [0])])

    t = threading.Thread(target=finish)
    t.start()
    table = R.load(str(path), timeout_s=10, poll_s=0.05)
    t.join()
    assert table.world_size == 1


def test_ranktable_timeout_names_status(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("h", [0])], status="initializing")
    t0 = time.monotonic()
    with pytest.raises(RanktableError, match="status is 'initializing'"):
        R.load(str(path), timeout_s=0.3, poll_s=0.05)
    assert time.monotonic() - t0 < 3
    with pytest.raises(RanktableError, match="does not exist"):
        R.load(str(tmp_path / "nope.json"), timeout_s=0)


def test_version_1_2_superpod_parses_as_server_list(tmp_path):
    path = write_ranktable_v1(tmp_path / "rt.json", [("a", [0, 1]), ("b", [0, 1])])
    doc = json.loads(path.read_text())
    doc["version"] = "1.2"
    doc["super_pod_list"] = [{"super_pod_id": "0", "server_list": [{"server_id": "a"}, {"server_id": "b"}]}]
    for s in doc["server_list"]:
        for d in s["device"]:
            d["super_device_id"] = d["device_id"]
    table = R.parse(doc, "x.json")
    assert table.version == "1.2" and [d.rank for d in table.devices] == [0, 1, 2, 3]


def _mutated_table(tmp_path, mutate, servers=(("h", [0, 1]),)):
    path = write_ranktable_v1(tmp_path / "rt.json", list(servers))
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "1.0", "", " ", "0x1", "+-1", True, None, 1.5])
def test_ranktable_integers_are_ascii_digit_strings(tmp_path, value):
    path = _mutated_table(tmp_path, lambda d: d["server_list"][0]["device"][1].update(rank_id=value))
    with pytest.raises(RanktableError, match=r"field server_list\[0\].device\[1\].rank_id must be an integer"):
        R.load(str(path), timeout_s=0)


def test_negative_device_id_is_refused(tmp_path):
    path = _mutated_table(tmp_path, lambda d: d["server_list"][0]["device"][0].update(device_id="-3"))
    with pytest.raises(RanktableError, match=r"device\[0\].device_id must be >= 0, got '-3'"):
        R.load(str(path), timeout_s=0)


def test_missing_device_ip_is_an_error_across_servers_and_a_warning_on_one(tmp_path, caplog):
    two = _mutated_table(tmp_path, lambda d: d["server_list"][1]["device"][0].pop("device_ip"),
                         servers=(("a", [0]), ("b", [0])))
    assert R.load(str(two), timeout_s=0).without_device_ip()[0].rank == 1  # parsing lets the launch decide
    with pytest.raises(LaunchError, match=r"rt.json: rank_id 1 \(server b, device 0\) has no device_ip, which HCCL "
                                          r"needs between servers"):
        E.resolve(_rt_env(two, 0, 2), host_ids=["a"])
    one = _mutated_table(tmp_path, lambda d: d["server_list"][0]["device"][1].update(device_ip=""))
    with caplog.at_level(logging.WARNING, logger="npu_runtime"):
        assert E.resolve(_rt_env(one, 1, 2), host_ids=["h"]).rank == 1
    assert "rank_id 1 (server h, device 1) has no device_ip" in caplog.text
    wrong = _mutated_table(tmp_path, lambda d: d["server_list"][0]["device"][1].update(device_ip=7))
    with pytest.raises(RanktableError, match=r"device\[1\].device_ip must be a string"):
        R.load(str(wrong), timeout_s=0)


def test_legacy_device_ip_across_servers(tmp_path):
    path = write_ranktable_legacy(tmp_path / "rt.json", [("a", [0]), ("b", [0])])
    doc = json.loads(path.read_text())
    doc["group_list"][0]["instance_list"][1]["devices"][0].pop("device_ip")
    path.write_text(json.dumps(doc))
    with pytest.raises(LaunchError, match="rank_id 1 .* has no device_ip"):
        E.resolve(_rt_env(path, 0, 2), host_ids=["a"])


def test_deeply_nested_json_is_a_ranktable_error(tmp_path):
    path = tmp_path / "rt.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RanktableError, match="nested too deeply"):
        R.load(str(path), timeout_s=0)


def test_ranktable_fifo_fails_at_once_instead_of_blocking(tmp_path):
    fifo = tmp_path / "rt.json"
    os.mkfifo(fifo)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(R.load, str(fifo), 300.0)
        try:
            with pytest.raises(RanktableError, match="is a FIFO"):
                future.result(timeout=30)
        except concurrent.futures.TimeoutError:
            # Unblock the reader so the test can end, then fail.
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"{}")
            os.close(fd)
            pytest.fail("reading a FIFO ranktable blocked")


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf"])
def test_ranktable_timeout_variable_is_named(value):
    with pytest.raises(LaunchError, match=f"NPU_RUNTIME_RANKTABLE_TIMEOUT='{value}'"):
        E.ranktable_timeout_s({"NPU_RUNTIME_RANKTABLE_TIMEOUT": value})
    assert E.ranktable_timeout_s({}) == 300.0
    assert E.ranktable_timeout_s({"NPU_RUNTIME_RANKTABLE_TIMEOUT": "2.5"}) == 2.5


def test_init_distributed_names_a_bad_ranktable_timeout(tmp_path):
    from npu_runtime import init_distributed

    path = write_ranktable_v1(tmp_path / "rt.json", [("127.0.0.1", [0, 1])])
    env = {"RANK_TABLE_FILE": str(path), "RANK_ID": "0", "RANK_SIZE": "2", "NPU_RUNTIME_RANKTABLE_TIMEOUT": "abc"}
    with pytest.raises(LaunchError, match="NPU_RUNTIME_RANKTABLE_TIMEOUT='abc'"):
        init_distributed(environ=env)


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "1e3"])
def test_environment_integers_are_ascii_digits(value):
    with pytest.raises(LaunchError, match="RANK="):
        E.resolve({"RANK": value, "WORLD_SIZE": "2000", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
