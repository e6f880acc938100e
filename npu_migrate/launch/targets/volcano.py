"""``volcano-job.yaml``: a ``batch.volcano.sh/v1alpha1`` Job, one pod per node.

What the Ascend Lite Cluster guide sets up, and why:

- ``schedulerName: volcano`` and ``minAvailable`` = the pod count: gang scheduling, so
  no pod holds NPUs while its peers cannot be placed;
- the ``ring-controller.atlas`` label (on the Job and its pods), the NPU resource
  (``huawei.com/Ascend910: "8"``) that Ascend's device plugin allocates,
  ``ASCEND_VISIBLE_DEVICES`` from its pod annotation, a ``nodeSelector`` on the plugin's
  node labels and one pod per node (:mod:`.pod`);
- the ``env`` plugin (``VC_TASK_INDEX``, the node rank) and the ``svc`` plugin (a
  headless service, so pod ``<job>-worker-0`` is reachable as ``<job>-worker-0.<job>``:
  the master address, known before any pod runs);
- ``restartPolicy: Never`` and restarts by exit class (npu_runtime.exitcodes): exit 78
  (fatal) -> ``TerminateJob``; 75/76/77 (hang, health, hardware) and any other failure
  (``PodFailed``, ``PodEvicted``) -> ``RestartJob``, at most ``maxRetry`` times. Volcano
  matches a job's policies in order, event first then exit code, so the exit-code
  policies come first. A lone restarted pod cannot rejoin a static torchrun rendezvous
  while its peers wait in HCCL, so a failure restarts the whole gang and the job
  resumes from its last checkpoint; the launcher in the pod does not restart by itself
  (``NPU_MAX_RESTARTS=0``). ``TaskCompleted`` -> ``CompleteJob`` ends it;
- a memory-backed ``/dev/shm``: DataLoader workers pass batches through it, and a
  container's default 64 MiB ends them with a bus error.

Each pod runs the generated torchrun launcher with ``NODE_RANK=$VC_TASK_INDEX``.
"""

from __future__ import annotations

import shlex

import yaml

from .. import shell
from ..artifacts import Artifact
from ..plan import LaunchPlan
from . import pod
from .torchrun import TORCHRUN_FILE

FILE = "volcano-job.yaml"
TASK = "worker"
CONTAINER = "train"
# Exit classes (npu_runtime.exitcodes) -> Volcano action; then any other failure restarts the gang.
EXIT_POLICIES = ((shell.FATAL, "TerminateJob"), (shell.HANG, "RestartJob"), (shell.HEALTH, "RestartJob"),
                 (shell.HARDWARE, "RestartJob"))


def master_addr(plan: LaunchPlan) -> str:
    """The first pod's name under the svc plugin's headless service."""
    return f"{plan.job_name}-{TASK}-0.{plan.job_name}"


def job(plan: LaunchPlan) -> dict:
    labels = {"ring-controller.atlas": plan.accelerator}
    env = [
        {"name": "NNODES", "value": str(plan.nodes)},
        {"name": "NPROC_PER_NODE", "value": str(plan.cards)},
        {"name": "MASTER_ADDR", "value": master_addr(plan)},
        {"name": "MASTER_PORT", "value": str(plan.master_port)},
        {"name": "NPU_MAX_RESTARTS", "value": "0"},  # Volcano restarts the gang (policies below)
        pod.visible_devices_env(plan),
    ]
    mounts, volumes = pod.volumes(plan)
    container = {
        "name": CONTAINER,
        "image": plan.image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": plan.workdir,
        "command": ["/bin/bash", "-c"],
        "args": [f'NODE_RANK="$VC_TASK_INDEX" exec bash {shlex.quote(plan.out_path(TORCHRUN_FILE))}'],
        "env": env,
        "ports": [{"name": "rendezvous", "containerPort": plan.master_port, "protocol": "TCP"}],
        "resources": pod.npu_resources(plan),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": plan.job_name, "namespace": plan.namespace, "labels": dict(labels)},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": plan.nodes,
            "maxRetry": plan.max_restarts,
            "queue": plan.queue,
            "plugins": {"env": [], "svc": []},
            "policies": [
                *({"exitCode": code, "action": action} for code, action in EXIT_POLICIES),
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
                            "nodeSelector": pod.node_selector(plan),
                            "affinity": pod.one_pod_per_node("app", plan.job_name),
                            "containers": [container],
                            "volumes": volumes,
                            **({"securityContext": ctx} if (ctx := pod.security_context(plan)) else {}),
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
    body = yaml.safe_dump(job(plan), sort_keys=False, default_flow_style=False, width=120)  # one document
    return [Artifact(path, "\n".join(header) + "\n" + body, executable=False)]
