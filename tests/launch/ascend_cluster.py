"""What a stock MindCluster cluster needs of a pod, and the AscendJob's shape, for the tests.

Encoded from MindCluster's documentation and samples (docs/launch.md lists them):
- the Ascend device plugin advertises ``huawei.com/Ascend910`` (910 and 910B servers;
  ``huawei.com/Ascend310P`` / ``huawei.com/Ascend310`` for inference cards) and writes the
  NPUs it allocated into the pod annotation of the same name, which the sample jobs pass
  to Ascend Docker Runtime as ``ASCEND_VISIBLE_DEVICES`` (downward API);
- an extended resource's request must equal its limit (Kubernetes), and a whole-card
  request is 1, 2, 4 or 8 NPUs (16 on a 16-NPU server);
- nodes carry ``accelerator-type`` (``module`` / ``half`` for Atlas 800 training servers,
  ``module-910b-8`` for Atlas 800T A2, ``module-910b-16`` for Atlas 200T A2 Box16,
  ``module-a3-16`` / ``module-a3-16-super-pod`` for Atlas A3, ``card-910b-2`` for 2-card
  servers) and ``host-arch`` (``huawei-arm`` / ``huawei-x86``) labels, and the samples select on both; the pod carries ``ring-controller.atlas`` (Volcano's Ascend
  plugin picks its chip handler by it);
- one pod per node: the samples' required pod anti-affinity on ``kubernetes.io/hostname``;
- the AscendJob (``mindxdl.gitee.com/v1``): the API reference's fields, PyTorch replica
  types ``Master`` (one) and ``Worker``, container ``ascend``, port ``ascendjob-port``,
  ``schedulerName: volcano`` with ``runPolicy.schedulingPolicy``.
"""

from __future__ import annotations

from typing import Any

from .volcano_job import pod_template_errors

RESOURCES = {"huawei.com/Ascend910", "huawei.com/Ascend310P", "huawei.com/Ascend310"}
WHOLE_CARDS = {1, 2, 4, 8, 16}
# accelerator-type label -> the most NPUs a server of that type offers
SERVER_NPUS = {"module": 8, "half": 4, "module-910b-8": 8, "module-910b-16": 16, "card-910b-2": 2, "card": 4,
               "module-a3-16": 16, "module-a3-16-super-pod": 16}
HOST_ARCHS = {"huawei-arm", "huawei-x86"}


def device_plugin_errors(job: dict, pod: dict, pods: int) -> list[str]:
    """What the device plugin and the scheduler need of one pod spec of ``job``."""
    errors = []
    if job.get("spec", {}).get("schedulerName") != "volcano":
        errors.append("spec.schedulerName: not volcano (gang scheduling, Ascend plugin)")
    containers = pod.get("containers", [])
    asking = [c for c in containers if any(r.startswith("huawei.com/") for r in c.get("resources", {}).get("limits", {}))]
    if len(asking) != 1:
        return errors + [f"{len(asking)} containers request NPUs (one must)"]
    [container] = asking
    limits, requests = container["resources"].get("limits", {}), container["resources"].get("requests", {})
    [(resource, count)] = [(k, v) for k, v in limits.items() if k.startswith("huawei.com/")]
    if resource not in RESOURCES:
        errors.append(f"{resource}: not a resource the Ascend device plugin advertises ({sorted(RESOURCES)})")
    if requests.get(resource) != count:
        errors.append(f"{resource}: request {requests.get(resource)!r} differs from limit {count!r}")
    if not str(count).isdigit() or int(count) not in WHOLE_CARDS:
        errors.append(f"{resource}: {count!r} is not a whole-server NPU count {sorted(WHOLE_CARDS)}")
    visible = [e for e in container.get("env", []) if e.get("name") == "ASCEND_VISIBLE_DEVICES"]
    want = f"metadata.annotations['{resource}']"
    if not visible or visible[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != want:
        errors.append(f"ASCEND_VISIBLE_DEVICES: not taken from the pod annotation ({want})")
    selector = pod.get("nodeSelector", {})
    kind = selector.get("accelerator-type")
    if kind not in SERVER_NPUS:
        errors.append(f"nodeSelector.accelerator-type: {kind!r} is not a device plugin label {sorted(SERVER_NPUS)}")
    elif str(count).isdigit() and int(count) > SERVER_NPUS[kind]:
        errors.append(f"nodeSelector.accelerator-type: {kind} servers have {SERVER_NPUS[kind]} NPUs, the pod asks {count}")
    if selector.get("host-arch") not in HOST_ARCHS:
        errors.append(f"nodeSelector.host-arch: {selector.get('host-arch')!r} is not one of {sorted(HOST_ARCHS)}")
    if pods > 1 and not _one_per_node(pod):
        errors.append("affinity: no required pod anti-affinity on kubernetes.io/hostname (two pods may share a node)")
    return errors


def _one_per_node(pod: dict) -> bool:
    terms = (pod.get("affinity", {}).get("podAntiAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", []))
    return any(t.get("topologyKey") == "kubernetes.io/hostname" for t in terms)


_SPEC_KEYS = {"schedulerName", "runPolicy", "successPolicy", "replicaSpecs"}
_RUN_POLICY_KEYS = {"backoffLimit", "activeDeadlineSeconds", "cleanPodPolicy", "ttlSecondsAfterFinished",
                    "schedulingPolicy"}
_SCHEDULING_KEYS = {"minAvailable", "minResources", "priorityClass", "queue"}
_REPLICA_KEYS = {"replicas", "restartPolicy", "template"}
RESTART_POLICIES = {"Always", "OnFailure", "Never", "ExitCode"}


def ascendjob_errors(job: dict, labels_in_template: bool = True) -> list[str]:
    """The AscendJob's fields (API reference), PyTorch replica rules, each pod template through
    the kubernetes models, and the device plugin's needs for each pod."""
    errors = []
    if job.get("apiVersion") != "mindxdl.gitee.com/v1" or job.get("kind") != "AscendJob":
        errors.append(f"apiVersion/kind: {job.get('apiVersion')}/{job.get('kind')} is not mindxdl.gitee.com/v1 AscendJob")
    labels = job.get("metadata", {}).get("labels", {})
    if labels.get("framework") != "pytorch":
        errors.append("metadata.labels.framework: must be pytorch for a PyTorch job")
    if not labels.get("ring-controller.atlas"):
        errors.append("metadata.labels: no ring-controller.atlas")
    spec: dict[str, Any] = job.get("spec", {})
    # The operator (controllers/v1/job.go reconcileWithFailed) fails the job on a failed pod
    # unless it is an unconditional-retry job: fault-retry-times a positive count, with
    # rescheduling on (fault-scheduling) and restartPolicy Never.
    retries = labels.get("fault-retry-times")
    backoff = spec.get("runPolicy", {}).get("backoffLimit")
    if retries is not None:
        if not str(retries).isdigit() or int(retries) < 1:
            errors.append(f"metadata.labels.fault-retry-times: {retries!r} is not a positive count")
        if labels.get("fault-scheduling") not in ("grace", "force"):
            errors.append("metadata.labels.fault-scheduling: grace or force is needed with fault-retry-times")
    elif isinstance(backoff, int) and backoff > 0:
        errors.append(f"spec.runPolicy.backoffLimit: {backoff} without fault-retry-times: the operator fails the job "
                      "on the first failed pod, nothing is retried")
    errors += [f"spec.{k}: unknown field" for k in sorted(set(spec) - _SPEC_KEYS)]
    run = spec.get("runPolicy", {})
    errors += [f"spec.runPolicy.{k}: unknown field" for k in sorted(set(run) - _RUN_POLICY_KEYS)]
    sched = run.get("schedulingPolicy", {})
    errors += [f"spec.runPolicy.schedulingPolicy.{k}: unknown field" for k in sorted(set(sched) - _SCHEDULING_KEYS)]
    replicas = spec.get("replicaSpecs", {})
    if set(replicas) - {"Master", "Worker"} or "Master" not in replicas:
        errors.append(f"spec.replicaSpecs: {sorted(replicas)}; PyTorch takes Master (1) and Worker")
    total = 0
    for kind, replica in replicas.items():
        where = f"spec.replicaSpecs.{kind}"
        errors += [f"{where}.{k}: unknown field" for k in sorted(set(replica) - _REPLICA_KEYS)]
        count = replica.get("replicas", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            errors.append(f"{where}.replicas: {count!r} is not a positive integer")
            continue
        total += count
        if kind == "Master" and count != 1:
            errors.append(f"{where}.replicas: a PyTorch AscendJob has exactly one Master")
        if replica.get("restartPolicy", "Never") not in RESTART_POLICIES:
            errors.append(f"{where}.restartPolicy: {replica.get('restartPolicy')!r} not in {sorted(RESTART_POLICIES)}")
        template = replica.get("template", {})
        errors += pod_template_errors(template, f"{where}.template")
        pod = template.get("spec", {})
        names = [c.get("name") for c in pod.get("containers", [])]
        if "ascend" not in names:
            errors.append(f"{where}: no container named ascend (the operator's default container)")
        ports = [p for c in pod.get("containers", []) for p in c.get("ports", [])]
        if not any(p.get("name") == "ascendjob-port" for p in ports):
            errors.append(f"{where}: no port named ascendjob-port")
        if labels_in_template and not template.get("metadata", {}).get("labels", {}).get("ring-controller.atlas"):
            errors.append(f"{where}.template: no ring-controller.atlas label")
        errors += [f"{where}: {e}" for e in device_plugin_errors(job, pod, 2 if total > 1 or len(replicas) > 1 else 1)]
    if sched.get("minAvailable") != total:
        errors.append(f"spec.runPolicy.schedulingPolicy.minAvailable: {sched.get('minAvailable')} is not the "
                      f"{total} pods (gang scheduling)")
    return errors
