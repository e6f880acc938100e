"""Two real gloo processes per launcher flavour, from synthetic environments."""

import json
import subprocess
import sys

import pytest

from ._helpers import (
    HERE,
    child_env,
    free_port,
    write_ranktable_legacy,
    write_ranktable_v1,
)

WORKER = str(HERE / "dist_worker.py")


def _reports(procs):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, f"exit {p.returncode}\n{stdout}\n{stderr}"
        line = next(ln for ln in stdout.splitlines() if ln.startswith("REPORT "))
        out.append(json.loads(line[len("REPORT "):]))
    return sorted(out, key=lambda r: r["rank"])


def _launch(envs, extra_args=()):
    return [subprocess.Popen([sys.executable, WORKER, *a], env=child_env(**e), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for e, a in zip(envs, extra_args or [()] * len(envs))]


def _check_pair(reports, source):
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["allreduce"] == 3.0 and r["source"] == source for r in reports)


@pytest.mark.slow
def test_torchrun_two_processes():
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                           "--master_addr=127.0.0.1", f"--master_port={free_port()}", WORKER],
                          env=child_env(), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    reports = sorted((json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")),
                     key=lambda r: r["rank"])
    _check_pair(reports, "torchrun")
    assert [r["local_rank"] for r in reports] == [0, 1]
    assert all(r["backend"] == "gloo" and r["device"] == "cpu" for r in reports)
    assert all(r["HCCL_CONNECT_TIMEOUT"] is None for r in reports)  # no ranktable: left alone


@pytest.mark.slow
def test_ascend_operator_node_ranks_and_local_rank_lists():
    port = str(free_port())
    # Two nodes with one device each: RANK is the node rank, LOCAL_RANK a list string.
    envs = [{"RANK": str(n), "LOCAL_RANK": "{0}", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1",
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port} for n in (0, 1)]
    _check_pair(_reports(_launch(envs)), "ascend-operator")
    # One node with two devices: the slot comes from the spawner (local_rank=).
    port = str(free_port())
    envs = [{"RANK": "0", "LOCAL_RANK": "{0,1}", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}] * 2
    reports = _reports(_launch(envs, [("--local-rank", "0"), ("--local-rank", "1")]))
    _check_pair(reports, "ascend-operator")
    assert [r["local_rank"] for r in reports] == [0, 1]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["v1", "legacy-dir"])
def test_per_card_ranktable(tmp_path, fmt):
    if fmt == "v1":
        path = write_ranktable_v1(tmp_path / "hccl.json", [("127.0.0.1", [0, 1])])
    else:
        write_ranktable_legacy(tmp_path / "jobstart_hccl.json", [("127.0.0.1", [0, 1])])
        path = tmp_path  # RANK_TABLE_FILE naming the directory
    port = str(free_port())
    envs = [{"RANK_TABLE_FILE": str(path), "RANK_ID": str(r), "RANK_SIZE": "2", "ASCEND_DEVICE_ID": str(r),
                 "MASTER_PORT": port, "NPU_RUNTIME_HOST_IP": "127.0.0.1"} for r in (0, 1)]
    reports = _reports(_launch(envs))
    _check_pair(reports, "ranktable")
    assert [r["local_rank"] for r in reports] == [0, 1]
    assert all(r["HCCL_CONNECT_TIMEOUT"] == "300" for r in reports)


@pytest.mark.slow
def test_modelarts_two_hosts():
    port = str(free_port())
    envs = [{"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": str(t), "MA_NUM_GPUS": "1", "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.1",
                 "MASTER_PORT": port} for t in (0, 1)]
    _check_pair(_reports(_launch(envs)), "modelarts")


@pytest.mark.slow
@pytest.mark.parametrize("flavour", ["ranktable", "modelarts", "ascend-operator"])
def test_install_lets_plain_init_process_group_work(tmp_path, flavour):
    port = str(free_port())
    if flavour == "ranktable":
        path = write_ranktable_v1(tmp_path / "hccl.json", [("127.0.0.1", [0, 1])])
        envs = [{"RANK_TABLE_FILE": str(path), "RANK_ID": str(r), "RANK_SIZE": "2", "MASTER_PORT": port,
                     "NPU_RUNTIME_HOST_IP": "127.0.0.1"} for r in (0, 1)]
    elif flavour == "modelarts":
        envs = [{"MA_NUM_HOSTS": "2", "VC_TASK_INDEX": str(t), "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.1",
                     "MASTER_PORT": port} for t in (0, 1)]
    else:
        envs = [{"RANK": str(n), "LOCAL_RANK": "{0}", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
                for n in (0, 1)]
    reports = _reports(_launch(envs, [("--mode", "install")] * 2))
    _check_pair(reports, flavour)


@pytest.mark.slow
def test_bad_environment_fails_in_the_child_with_the_variable_named(tmp_path):
    path = write_ranktable_v1(tmp_path / "hccl.json", [("10.1.1.1", [0]), ("10.1.1.2", [0])])
    envs = [{"RANK_TABLE_FILE": str(path), "RANK_ID": "0", "RANK_SIZE": "2", "NPU_RUNTIME_HOST_IP": "10.9.9.9"}]
    (p,) = _launch(envs)
    _out, err = p.communicate(timeout=120)
    assert p.returncode != 0
    assert "LaunchError" in err and "hccl.json: no server_id/host_ip matches this host" in err
