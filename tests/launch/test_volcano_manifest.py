"""The generated Volcano Job validates against Volcano's Job CRD and admission rules
(tests/launch/volcano_job.py) and its pod template against the kubernetes models;
and the validator itself rejects each kind of fault."""

from __future__ import annotations

import copy

import pytest
import yaml

from npu_migrate.launch.plan import build_plan
from npu_migrate.launch.targets import render, volcano

from .ascend_cluster import device_plugin_errors
from .volcano_job import job_errors


@pytest.fixture(autouse=True)
def _in_project(project, monkeypatch):
    monkeypatch.chdir(project)  # flag paths are relative to the current directory


def _job(project, **flags) -> dict:
    plan = build_plan({}, {"entry": "train.py", "targets": ["volcano"], "image": "r/train:1", **flags}, project)
    [artifact] = [a for a in render(plan) if a.path.endswith(volcano.FILE)]
    return yaml.safe_load(artifact.text)


@pytest.mark.parametrize(
    "flags",
    [
        {},
        {"nodes": 2, "cards": 8},
        {"nodes": 64, "cards": 8, "job-name": "llama-pretrain", "namespace": "ml", "queue": "train-high"},
        {"nodes": 4, "cards": 16},
        {"nodes": 2, "cards": 8, "accelerator": "ascend-910", "host-arch": "huawei-x86", "driver-mounts": True},
        {"nodes": 2, "cards": 4, "workdir": "/home/ma-user/code", "master-port": 6000, "out": "k8s"},
    ],
)
def test_generated_job_validates(project, flags):
    job = _job(project, **flags)
    assert job_errors(job) == []
    plan_nodes = flags.get("nodes", 1)
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == spec["tasks"][0]["replicas"] == plan_nodes  # gang scheduling
    pod = spec["tasks"][0]["template"]
    label = flags.get("accelerator", "ascend-910b")
    assert job["metadata"]["labels"]["ring-controller.atlas"] == label == pod["metadata"]["labels"]["ring-controller.atlas"]
    [container] = pod["spec"]["containers"]
    resource = flags.get("npu-resource", "huawei.com/Ascend910")
    assert container["resources"]["limits"] == {resource: str(flags.get("cards", 8))}
    assert device_plugin_errors(job, pod["spec"], plan_nodes) == []


def test_master_address_is_the_first_pod_under_the_svc_plugin(project):
    job = _job(project, nodes=3, **{"job-name": "bert"})
    env = {e["name"]: e.get("value") for e in job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]}
    # svc plugin: hostname <job>-<task>-<index>, subdomain <job> (pkg/controllers/job/plugins/svc)
    assert env == {"NNODES": "3", "NPROC_PER_NODE": "8", "MASTER_ADDR": "bert-worker-0.bert", "MASTER_PORT": "29500",
                   "NPU_MAX_RESTARTS": "0", "ASCEND_VISIBLE_DEVICES": None}
    assert "svc" in job["spec"]["plugins"] and "env" in job["spec"]["plugins"]


def _set(path: str, value):
    def mutate(job):
        *parents, last = path.split(".")
        node = job
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return mutate


_DELETE = object()
CONTAINER = "spec.tasks.0.template.spec.containers.0"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set("spec.minAvailable", 3), "should not be greater than total replicas"),
        (_set("spec.minAvailable", -1), "below the minimum 0"),
        (_set("spec.maxRetry", "3"), "must be an integer"),
        (_set("spec.queue", "Default"), "does not match"),
        (_set("spec.schedulerNme", "volcano"), "unknown field"),
        (_set("spec.policies.4.event", "PodCrashed"), "is not one of"),
        (_set("spec.policies.4.event", "PodRunning"), "invalid policy event"),
        (_set("spec.policies.4.action", "Restart"), "invalid policy action"),
        (_set("spec.policies.5.event", "PodEvicted"), "duplicate policy event"),
        (_set("spec.policies.4.exitCode", 1), "must not specify event and exitCode"),
        (_set("spec.policies.1.exitCode", 78), "duplicate exitCode 78"),
        (_set("spec.policies.0.exitCode", 0), "0 is not a valid exit code"),
        (_set("spec.plugins.hccl", []), "unable to find job plugin"),
        (_set("spec.tasks.0.name", "Worker"), "does not match"),
        (_set("spec.tasks.0.replicas", 1), "greater than total replicas"),
        (_set("spec.tasks.0.minAvailable", 5), "'minAvailable' is greater than 'replicas'"),
        (_set("metadata.name", "x" * 70), "not a valid qualified name"),
        (_set(f"{CONTAINER}.name", _DELETE), "name"),
        (_set(f"{CONTAINER}.resources.limit", {}), "unknown field"),
        (_set(f"{CONTAINER}.ports.0.containerPort", "29500x"), "containerPort"),
        (_set(f"{CONTAINER}.env.0.vaule", "2"), "unknown field"),
        (_set("apiVersion", "batch.volcano.sh/v1"), "apiVersion"),
    ],
)
def test_validator_rejects_each_fault(project, mutate, expected):
    job = _job(project, nodes=2)
    assert job_errors(job) == []
    bad = copy.deepcopy(job)
    mutate(bad)
    errors = job_errors(bad)
    assert any(expected in e for e in errors), errors


def _preflight_sysctl(tmp_path, port_range: str) -> list[str]:
    """The node preflight's sysctl check of a 2 x 8 job on a pod whose network namespace has
    ``port_range`` and no reserved ports (a new namespace's state)."""
    from npu_runtime.preflight import sysctl
    from npu_runtime.preflight.context import Context

    proc = tmp_path / "proc"
    for name, value in {"net.ipv4.ip_local_port_range": port_range, "net.ipv4.ip_local_reserved_ports": "",
                        "net.core.somaxconn": "4096", "net.ipv4.tcp_max_syn_backlog": "1024"}.items():
        path = proc / "sys" / name.replace(".", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n", encoding="ascii")
    ctx = Context({}, nodes=2, cards=8, node_rank=0, proc_root=proc)
    sysctl.check(ctx)
    return [p.line() for p in ctx.problems]


@pytest.mark.parametrize(("env", "span"), [({}, "32768 59999"), ({"HCCL_IF_BASE_PORT": "33000"}, "33016 60999")])
def test_multi_node_pods_keep_hccls_ports_out_of_the_ephemeral_range(project, tmp_path, env, span):
    """A pod's network namespace starts with the kernel's 32768-60999 and nothing reserved:
    HCCL's 60000-60015 would be ephemeral, and the preflight in the pod would stop the job.
    The pod sysctl (safe in every Kubernetes release) moves the range; the preflight agrees."""
    job = _job(project, nodes=2, cards=8, env=env)
    pod = job["spec"]["tasks"][0]["template"]["spec"]
    assert pod["securityContext"] == {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": span}]}
    assert job_errors(job) == []
    if not env:
        assert _preflight_sysctl(tmp_path / "pod", span.replace(" ", "\t")) == []
        assert any("not all reserved" in line for line in _preflight_sysctl(tmp_path / "bare", "32768\t60999"))
    assert "securityContext" not in _job(project, nodes=1, cards=8)["spec"]["tasks"][0]["template"]["spec"]
