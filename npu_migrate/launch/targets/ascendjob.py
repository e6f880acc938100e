"""``ascendjob.yaml``: an AscendJob for MindCluster's Ascend Operator (``mindxdl.gitee.com/v1``),
one pod per node, each running the per-card ranktable launcher against the ranktable the
operator generates.

Shape, from MindCluster's ``pytorch_multinodes_acjob_910b.yaml`` sample and the
AscendJob API reference (docs/launch.md lists the sources):

- labels ``framework: pytorch`` and ``ring-controller.atlas`` on the job and its pods;
- ``schedulerName: volcano`` with ``runPolicy.schedulingPolicy`` (``minAvailable`` = the
  pod count, ``queue``): gang scheduling; restarts through MindCluster's retry labels
  (``fault-scheduling``, ``fault-retry-times``) bounded by ``runPolicy.backoffLimit``;
- ``replicaSpecs``: ``Master`` (1 pod, node 0) and ``Worker`` (the other nodes), each
  with ``restartPolicy: Never``, a container named ``ascend`` (the operator looks for it)
  with the port ``ascendjob-port``, the NPU resource, ``ASCEND_VISIBLE_DEVICES`` from the
  pod annotation, the ``accelerator-type``/``host-arch`` nodeSelector, one pod per node;
- the ranktable: a ConfigMap ``rings-config-<job>`` (key ``hccl.json``, status
  ``initializing`` until the operator fills it in) mounted at
  ``/user/serverid/devindex/config``; the pod's ``RANK_TABLE_FILE`` points at it, and
  ``npu_runtime`` (through the launcher and ``npu_runtime.install()``) waits for status
  ``completed`` and takes every rank, device and address from it.

The operator's own variables (``RANK`` = the node rank, ``LOCAL_RANK`` = ``{0,1,...}``,
``WORLD_SIZE``, ``MASTER_ADDR``) describe a per-node launch; the pod passes ``RANK`` on
as ``NODE_RANK`` and clears the others, so the per-card processes are described by the
ranktable alone (``RANK_ID``/``DEVICE_ID``, as in ModelArts' per-card mode).
"""

from __future__ import annotations

import shlex

import yaml

from .. import shell
from ..artifacts import Artifact
from ..plan import LaunchPlan
from . import pod
from .ranktable import FILE as RANKTABLE_FILE

FILE = "ascendjob.yaml"
CONTAINER = "ascend"  # the operator's default container name
PORT_NAME = "ascendjob-port"
RANKTABLE_DIR = "/user/serverid/devindex/config"
JOB_NAME_LABEL = "job-name"


def configmap_name(plan: LaunchPlan) -> str:
    return f"rings-config-{plan.job_name}"


def configmap(plan: LaunchPlan) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap_name(plan), "namespace": plan.namespace,
                     "labels": {"ring-controller.atlas": plan.accelerator}},
        "data": {"hccl.json": '{"status": "initializing"}'},
    }


def _template(plan: LaunchPlan) -> dict:
    launcher = shlex.quote(plan.out_path(RANKTABLE_FILE))
    env = [
        {"name": "NNODES", "value": str(plan.nodes)},
        {"name": "NPROC_PER_NODE", "value": str(plan.cards)},
        {"name": "RANK_TABLE_FILE", "value": f"{RANKTABLE_DIR}/hccl.json"},
        {"name": "NPU_MAX_RESTARTS", "value": "0"},  # the operator restarts the job (backoffLimit)
        {"name": "NPU_RUNTIME_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        pod.visible_devices_env(plan),
    ]
    mounts, volumes = pod.volumes(plan)
    mounts.append({"name": "ranktable", "mountPath": RANKTABLE_DIR, "readOnly": True})
    volumes.append({"name": "ranktable", "configMap": {"name": configmap_name(plan)}})
    container = {
        "name": CONTAINER,
        "image": plan.image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": plan.workdir,
        "command": ["/bin/bash", "-c"],
        "args": [f'export NODE_RANK="$RANK"; unset RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE; exec bash {launcher}'],
        "env": env,
        "ports": [{"name": PORT_NAME, "containerPort": plan.master_port}],
        "resources": pod.npu_resources(plan),
        "volumeMounts": mounts,
    }
    return {
        "metadata": {"labels": {"ring-controller.atlas": plan.accelerator}},
        "spec": {
            "nodeSelector": pod.node_selector(plan),
            "affinity": pod.one_pod_per_node(JOB_NAME_LABEL, plan.job_name),
            "containers": [container],
            "volumes": volumes,
            **({"securityContext": ctx} if (ctx := pod.security_context(plan)) else {}),
        },
    }


def _job_labels(plan: LaunchPlan) -> dict:
    """``framework`` and ``ring-controller.atlas``; with restarts, MindCluster's retry labels.

    The operator fails the whole job on the first failed pod of a ``restartPolicy: Never``
    replica unless the job is an "unconditional retry" job: ``fault-retry-times: N`` (a
    positive count; MindCluster asks for ``restartPolicy: Never`` with it) together with
    rescheduling, ``fault-scheduling`` (``grace``: the pods get SIGTERM and time to exit).
    ``runPolicy.backoffLimit`` then bounds the reschedules."""
    labels = {"framework": "pytorch", "ring-controller.atlas": plan.accelerator}
    if plan.max_restarts > 0:
        labels |= {"fault-scheduling": "grace", "fault-retry-times": str(plan.max_restarts)}
    return labels


def job(plan: LaunchPlan) -> dict:
    replicas = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": _template(plan)}}
    if plan.nodes > 1:
        replicas["Worker"] = {"replicas": plan.nodes - 1, "restartPolicy": "Never", "template": _template(plan)}
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": plan.job_name, "namespace": plan.namespace, "labels": _job_labels(plan)},
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": {"backoffLimit": plan.max_restarts,
                          "schedulingPolicy": {"minAvailable": plan.nodes, "queue": plan.queue}},
            "successPolicy": "AllWorkers",
            "replicaSpecs": replicas,
        },
    }


def render(plan: LaunchPlan) -> list[Artifact]:
    path = plan.out_path(FILE)
    header = [
        f"# AscendJob (MindCluster Ascend Operator): {plan.entry} on {plan.nodes} node(s) x {plan.cards} NPU(s),",
        "# one pod per node; the operator writes the ranktable into the ConfigMap mounted at",
        f"# {RANKTABLE_DIR}.",
        f"# {shell.GENERATED_BY}; regenerate instead of editing.",
        f"# Submit: kubectl apply -f {path}",
        f"# The image holds the project at {plan.workdir} (with {plan.out_path(RANKTABLE_FILE)}), torch, torch_npu",
        "# and npu-runtime; each pod runs that launcher with NODE_RANK=$RANK (the operator's node rank).",
        ("# The operator reschedules the whole job after a failed pod up to fault-retry-times (and "
         "runPolicy.backoffLimit)" if plan.max_restarts > 0 else
         "# --max-restarts 0: no retry labels, so the operator fails the job on the first failed pod."),
        *(["# times, whatever the exit class (MindCluster's unconditional retry; Volcano must run its Ascend plugin)."]
          if plan.max_restarts > 0 else []),
    ]
    body = yaml.safe_dump_all([configmap(plan), job(plan)], sort_keys=False, default_flow_style=False, width=120)
    return [Artifact(path, "\n".join(header) + "\n" + body, executable=False)]
