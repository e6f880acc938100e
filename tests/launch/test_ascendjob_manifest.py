"""The generated AscendJob (MindCluster Ascend Operator) and the Volcano Job against what the
device plugin and the scheduler need (tests/launch/ascend_cluster.py), and the validators
themselves against each kind of fault."""

from __future__ import annotations

import copy

import pytest
import yaml

from npu_migrate.launch.plan import build_plan
from npu_migrate.launch.targets import ascendjob, render, volcano

from .ascend_cluster import ascendjob_errors, device_plugin_errors


@pytest.fixture(autouse=True)
def _in_project(project, monkeypatch):
    monkeypatch.chdir(project)


def _documents(project, target_file, **flags) -> list[dict]:
    plan = build_plan({}, {"entry": "train.py", "targets": ["ascendjob", "volcano"], "image": "r/train:1", **flags},
                      project)
    [artifact] = [a for a in render(plan) if a.path.endswith(target_file)]
    return list(yaml.safe_load_all(artifact.text))


@pytest.mark.parametrize("flags", [{}, {"nodes": 2, "cards": 8}, {"nodes": 4, "cards": 16, "job-name": "llm"},
                                   {"nodes": 3, "cards": 8, "driver-mounts": True, "host-arch": "huawei-x86"},
                                   {"nodes": 2, "cards": 4, "accelerator-type": "half", "accelerator": "ascend-910"}])
def test_generated_ascendjob_validates(project, flags):
    configmap, job = _documents(project, ascendjob.FILE, **flags)
    assert ascendjob_errors(job) == []
    nodes = flags.get("nodes", 1)
    replicas = job["spec"]["replicaSpecs"]
    assert replicas["Master"]["replicas"] == 1
    assert replicas.get("Worker", {}).get("replicas", 0) == nodes - 1
    # The ranktable the operator writes: the rings-config-<job> ConfigMap, mounted where RANK_TABLE_FILE points.
    name = job["metadata"]["name"]
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["name"] == f"rings-config-{name}"
    assert '"initializing"' in configmap["data"]["hccl.json"]
    pod = replicas["Master"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == f"rings-config-{name}"
    [container] = pod["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RANK_TABLE_FILE"] == f"{mount['mountPath']}/hccl.json"
    assert env["NPU_MAX_RESTARTS"] == "0"
    # The pod runs the per-card launcher with the operator's node rank, clearing its per-node variables.
    assert container["args"] == [('export NODE_RANK="$RANK"; unset RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE; '
                                  'exec bash launch/ranktable.sh')]


def test_ascendjob_also_writes_the_ranktable_launcher(run_cli, project):
    result = run_cli("launch", "train.py", "-t", "ascendjob", "--image", "r/x:1", "--write", cwd=project)
    assert result.exit_code == 0, result.output
    assert (project / "launch" / "ranktable.sh").is_file() and (project / "launch" / "ascendjob.yaml").is_file()


def _mutate(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is None:
        del node[int(last) if last.isdigit() else last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return doc


MASTER = "spec.replicaSpecs.Master"
POD = f"{MASTER}.template.spec"
C = f"{POD}.containers.0"


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("apiVersion", "kubeflow.org/v1", "is not mindxdl.gitee.com/v1 AscendJob"),
    ("metadata.labels.framework", "mindspore", "must be pytorch"),
    ("spec.runPolicy.schedulingPolicy.minAvailable", 1, "is not the 2 pods"),
    ("spec.runPolicy.backofLimit", 3, "unknown field"),
    (f"{MASTER}.replicas", 2, "exactly one Master"),
    (f"{MASTER}.restartPolicy", "Sometimes", "restartPolicy"),
    (f"{C}.name", "train", "no container named ascend"),
    (f"{C}.ports.0.name", "rendezvous", "no port named ascendjob-port"),
    (f"{C}.resources.limits", {"huawei.com/ascend-910b": "8"}, "not a resource the Ascend device plugin advertises"),
    (f"{C}.resources.requests", {"huawei.com/Ascend910": "4"}, "differs from limit"),
    (f"{C}.env.5", None, "ASCEND_VISIBLE_DEVICES: not taken from the pod annotation"),
    (f"{POD}.nodeSelector.accelerator-type", "card-910b-2", "card-910b-2 servers have 2 NPUs, the pod asks 8"),
    (f"{POD}.nodeSelector.host-arch", "arm64", "host-arch"),
    (f"{POD}.affinity", None, "two pods may share a node"),
    (f"{C}.bogus", 1, "unknown field"),
    ("metadata.labels.fault-retry-times", None, "without fault-retry-times: the operator fails the job"),
    ("metadata.labels.fault-retry-times", "0", "is not a positive count"),
    ("metadata.labels.fault-scheduling", None, "grace or force is needed with fault-retry-times"),
])
def test_ascendjob_validator_rejects_each_fault(project, path, value, expected):
    _configmap, job = _documents(project, ascendjob.FILE, nodes=2, cards=8)
    assert ascendjob_errors(job) == []
    errors = ascendjob_errors(_mutate(job, path, value))
    assert any(expected in e for e in errors), errors


def test_volcano_job_meets_the_device_plugin_and_scheduler(project):
    [job] = _documents(project, volcano.FILE, nodes=2, cards=8)
    pod = job["spec"]["tasks"][0]["template"]["spec"]
    assert device_plugin_errors(job, pod, 2) == []
    assert pod["nodeSelector"] == {"accelerator-type": "module-910b-8", "host-arch": "huawei-arm"}
    # The old resource name would leave the Job Pending on a MindCluster cluster.
    stale = _mutate(job, "spec.tasks.0.template.spec.containers.0.resources",
                    {"limits": {"huawei.com/ascend-910b": "8"}, "requests": {"huawei.com/ascend-910b": "8"}})
    assert any("not a resource the Ascend device plugin advertises" in e
               for e in device_plugin_errors(stale, stale["spec"]["tasks"][0]["template"]["spec"], 2))


def test_volcano_restarts_by_exit_class_before_any_other_failure(project):
    [job] = _documents(project, volcano.FILE, nodes=2, **{"max-restarts": 5})
    policies = job["spec"]["policies"]
    # Volcano matches policies in order (event, then exit code, per policy): exit codes come first.
    assert policies[:4] == [{"exitCode": 78, "action": "TerminateJob"}, {"exitCode": 75, "action": "RestartJob"},
                            {"exitCode": 76, "action": "RestartJob"}, {"exitCode": 77, "action": "RestartJob"}]
    assert policies[4:] == [{"event": "PodEvicted", "action": "RestartJob"},
                            {"event": "PodFailed", "action": "RestartJob"}]
    assert job["spec"]["maxRetry"] == 5


@pytest.mark.parametrize(("cards", "accelerator", "expected"), [(8, "ascend-910b", "module-910b-8"),
                                                                (2, "ascend-910b", "module-910b-8"),
                                                                (16, "ascend-910b", "module-910b-16"),
                                                                (8, "ascend-910", "module")])
def test_node_selector_follows_the_card_count_and_series(project, cards, accelerator, expected):
    [job] = _documents(project, volcano.FILE, cards=cards, accelerator=accelerator, targets=["volcano"])
    assert job["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"]["accelerator-type"] == expected


@pytest.mark.parametrize(("restarts", "labels"), [
    (3, {"framework": "pytorch", "ring-controller.atlas": "ascend-910b", "fault-scheduling": "grace",
         "fault-retry-times": "3"}),
    (0, {"framework": "pytorch", "ring-controller.atlas": "ascend-910b"}),
])
def test_restarts_use_mindclusters_retry_labels(project, restarts, labels):
    """The operator retries a failed job only as an unconditional-retry job (fault-retry-times
    with fault-scheduling); --max-restarts 0 leaves the labels out and the job fails at once."""
    _configmap, job = _documents(project, ascendjob.FILE, nodes=2, cards=8, **{"max-restarts": restarts})
    assert job["metadata"]["labels"] == labels
    assert job["spec"]["runPolicy"]["backoffLimit"] == restarts
    assert all(r["restartPolicy"] == "Never" for r in job["spec"]["replicaSpecs"].values())
    sysctl = {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "32768 59999"}]}
    assert all(r["template"]["spec"]["securityContext"] == sysctl for r in job["spec"]["replicaSpecs"].values())
    assert ascendjob_errors(job) == []
