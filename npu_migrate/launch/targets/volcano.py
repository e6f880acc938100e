"""``volcano-job.yaml``: a ``batch.volcano.sh/v1alpha1`` Job, one pod per node.

What the Ascend Lite Cluster guide sets up, and why:

- ``schedulerName: volcano`` and ``minAvailable`` = the pod count: gang scheduling, so
  no pod holds NPUs while its peers cannot be placed;
- the ``ring-controller.atlas`` label (on the Job and its pods) and the NPU resource
  limit (``huawei.com/ascend-910b: "8"``) that Ascend's device plugin allocates;
- the ``env`` plugin (``VC_TASK_INDEX``, the node rank) and the ``svc`` plugin (a
  headless service, so pod ``<job>-worker-0`` is reachable as ``<job>-worker-0.<job>``:
  the master address, known before any pod runs);
- ``restartPolicy: Never`` with ``PodFailed``/``PodEvicted`` -> ``RestartJob``: a lone
  restarted pod cannot rejoin a static torchrun rendezvous while its peers wait in HCCL,
  so a failure restarts the whole gang (at most ``maxRetry`` times) and the job resumes
  from its last checkpoint; ``TaskCompleted`` -> ``CompleteJob`` ends it;
- a memory-backed ``/dev/shm``: DataLoader workers pass batches through it, and a
  container's default 64 MiB ends them with a bus error.

Each pod runs the generated torchrun launcher with ``NODE_RANK=$VC_TASK_INDEX``.
"""

from __future__ import annotations

import yaml

from .. import shell
from ..artifacts import Artifact
from ..plan import LaunchPlan
from .torchrun import TORCHRUN_FILE

FILE = "volcano-job.yaml"
TASK = "worker"
CONTAINER = "train"
MAX_RETRY = 3


def master_addr(plan: LaunchPlan) -> str:
    """The first pod's name under the svc plugin's headless service."""
    return f"{plan.job_name}-{TASK}-0.{plan.job_name}"


def job(plan: LaunchPlan) -> dict:
    labels = {"ring-controller.atlas": plan.accelerator}
    npus = {plan.npu_resource: str(plan.cards)}
    env = [
        {"name": "NNODES", "value": str(plan.nodes)},
        {"name": "NPROC_PER_NODE", "value": str(plan.cards)},
        {"name": "MASTER_ADDR", "value": master_addr(plan)},
        {"name": "MASTER_PORT", "value": str(plan.master_port)},
    ]
    container = {
        "name": CONTAINER,
        "image": plan.image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": plan.workdir,
        "command": ["/bin/bash", "-c"],
        "args": [f'NODE_RANK="$VC_TASK_INDEX" exec bash {plan.out_path(TORCHRUN_FILE)}'],
        "env": env,
        "ports": [{"name": "rendezvous", "containerPort": plan.master_port, "protocol": "TCP"}],
        "resources": {"requests": dict(npus), "limits": dict(npus)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": plan.job_name, "namespace": plan.namespace, "labels": dict(labels)},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": plan.nodes,
            "maxRetry": MAX_RETRY,
            "queue": plan.queue,
            "plugins": {"env": [], "svc": []},
            "policies": [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodFailed", "action": "RestartJob"},
            ],
            "tasks": [
                {
                    "name": TASK,
                    "replicas": plan.nodes,
                    "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                    "template": {
                        "metadata": {"labels": {"app": plan.job_name, **labels}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [container],
                            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                        },
                    },
                }
            ],
        },
    }


def render(plan: LaunchPlan) -> list[Artifact]:
    path = plan.out_path(FILE)
    header = [
        f"# Volcano Job: {plan.entry} on {plan.nodes} node(s) x {plan.cards} NPU(s), one pod per node.",
        f"# {shell.GENERATED_BY}; regenerate instead of editing.",
        f"# Submit: kubectl apply -f {path}",
        f"# The image holds the project at {plan.workdir} (with {plan.out_path(TORCHRUN_FILE)}), torch, torch_npu",
        "# and npu-runtime; each pod runs that launcher with NODE_RANK=$VC_TASK_INDEX.",
    ]
    body = yaml.safe_dump(job(plan), sort_keys=False, default_flow_style=False, width=120)
    return [Artifact(path, "\n".join(header) + "\n" + body, executable=False)]
