"""A validator for Volcano ``batch.volcano.sh/v1alpha1`` Jobs, for the tests.

Encoded by hand from volcano-sh/volcano:
- the Job CRD's structural schema
  (``installer/helm/chart/volcano/crd/bases/batch.volcano.sh_jobs.yaml``): every field
  of ``spec`` and ``spec.tasks[]`` with its type, enum, minimum and pattern; the API
  server prunes unknown fields of a structural schema silently, so an unknown field
  here is an error (it would be lost);
- the admission rules Volcano enforces on create (``installer/helm/chart/volcano/policy/
  jobs-validating.yaml`` and ``pkg/webhooks/admission/jobs/validate``): at least one task,
  unique task names, ``minAvailable`` within the replicas, valid and non-duplicate
  policy events/actions, known plugins, qualified job and pod names;
- the pod template of each task is checked through the ``kubernetes`` client's models
  (:func:`pod_template_errors`): required fields, types, and no field the models
  do not know.
"""

from __future__ import annotations

import re
from typing import Any

_DNS_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# k8s.io/apimachinery validation.IsQualifiedName (name part; no prefix used here)
_QUALIFIED = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
EVENTS = ["*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "OutOfSync",
          "CommandIssued", "JobUpdated", "TaskFailed"]
# Events and actions a user may put in a policy (util.go policyEventMap / policyActionMap, "true" entries)
USER_EVENTS = {"*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated"}
USER_ACTIONS = {"AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob",
                "CompleteJob", "ResumeJob"}
PLUGINS = {"ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray"}  # plugins/factory.go


def _s(enum=None, pattern=None, max_length=None):
    return {"type": "string", "enum": enum, "pattern": pattern, "maxLength": max_length}


def _i(minimum=None):
    return {"type": "integer", "minimum": minimum}


def _o(props=None, required=(), free=False):
    return {"type": "object", "properties": props or {}, "required": tuple(required), "free": free}


def _a(items):
    return {"type": "array", "items": items}


def _map(values):
    return {"type": "map", "values": values}


_POLICY = _o({"action": _s(), "event": _s(enum=EVENTS), "events": _a(_s(enum=EVENTS)), "exitCode": _i(),
              "timeout": _s()})
_NETWORK_TOPOLOGY = _o({"highestTierAllowed": _i(0), "highestTierName": _s(max_length=253),
                        "mode": _s(enum=["hard", "soft"])})
_TASK = _o({
    "dependsOn": _o({"iteration": _s(), "name": _a(_s())}),
    "maxRetry": _i(0),
    "minAvailable": _i(0),
    "name": _s(pattern=_DNS_LABEL),
    "partitionPolicy": _o({"minPartitions": _i(0), "networkTopology": _NETWORK_TOPOLOGY, "partitionSize": _i(1),
                           "totalPartitions": _i(1)}, required=("partitionSize", "totalPartitions")),
    "policies": _a(_POLICY),
    "replicas": _i(0),
    "template": _o(free=True),  # a core/v1 PodTemplateSpec: see pod_template_errors
    "topologyPolicy": _s(enum=["none", "best-effort", "restricted", "single-numa-node"]),
})
_VOLUME = _o({"mountPath": _s(pattern=r"^[^:]+$"), "volumeClaim": _o(free=True), "volumeClaimName": _s()},
             required=("mountPath",))
SPEC = _o({
    "maxRetry": _i(0),
    "minAvailable": _i(0),
    "minSuccess": _i(1),
    "networkTopology": _NETWORK_TOPOLOGY,
    "plugins": _map(_a(_s())),
    "policies": _a(_POLICY),
    "priorityClassName": _s(pattern=_DNS_NAME),
    "queue": _s(pattern=_DNS_NAME),
    "runningEstimate": _s(),
    "schedulerName": _s(),
    "tasks": _a(_TASK),
    "ttlSecondsAfterFinished": _i(0),
    "volumes": _a(_VOLUME),
})
INT32 = (-(2**31), 2**31 - 1)


def schema_errors(value: Any, schema: dict, where: str) -> list[str]:
    kind = schema["type"]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{where}: must be a string, got {value!r}"]
        errors = []
        if schema["enum"] is not None and value not in schema["enum"]:
            errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
        if schema["pattern"] is not None and not re.match(schema["pattern"], value):
            errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
        if schema["maxLength"] is not None and len(value) > schema["maxLength"]:
            errors.append(f"{where}: longer than {schema['maxLength']}")
        return errors
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{where}: must be an integer, got {value!r}"]
        if not INT32[0] <= value <= INT32[1]:
            return [f"{where}: {value} is outside int32"]
        if schema["minimum"] is not None and value < schema["minimum"]:
            return [f"{where}: {value} is below the minimum {schema['minimum']}"]
        return []
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: must be a list, got {type(value).__name__}"]
        return [e for i, item in enumerate(value) for e in schema_errors(item, schema["items"], f"{where}[{i}]")]
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{where}: must be a mapping, got {type(value).__name__}"]
        return [e for k, v in value.items() for e in schema_errors(v, schema["values"], f"{where}.{k}")]
    if not isinstance(value, dict):
        return [f"{where}: must be a mapping, got {type(value).__name__}"]
    if schema["free"]:
        return []
    errors = [f"{where}.{key}: required" for key in schema["required"] if key not in value]
    for key, item in value.items():
        if key not in schema["properties"]:
            errors.append(f"{where}.{key}: unknown field (the API server would prune it)")
        else:
            errors += schema_errors(item, schema["properties"][key], f"{where}.{key}")
    return errors


def _policy_errors(policies: list[dict], where: str) -> list[str]:
    errors, events, codes = [], set(), set()
    for i, policy in enumerate(policies):
        listed = ([policy["event"]] if policy.get("event") else []) + list(policy.get("events", []))
        if listed and "exitCode" in policy:
            errors.append(f"{where}[{i}]: must not specify event and exitCode simultaneously")
        elif not listed and "exitCode" not in policy:
            errors.append(f"{where}[{i}]: either event or exitCode should be specified")
        elif listed:
            for event in dict.fromkeys(listed):
                if event not in USER_EVENTS:
                    errors.append(f"{where}[{i}]: invalid policy event {event!r}")
                if event in events:
                    errors.append(f"{where}[{i}]: duplicate policy event {event!r}")
                events.add(event)
            if policy.get("action") not in USER_ACTIONS:
                errors.append(f"{where}[{i}]: invalid policy action {policy.get('action')!r}")
        else:
            if policy["exitCode"] == 0:
                errors.append(f"{where}[{i}]: 0 is not a valid exit code")
            if policy["exitCode"] in codes:
                errors.append(f"{where}[{i}]: duplicate exitCode {policy['exitCode']}")
            codes.add(policy["exitCode"])
    if "*" in events and len(events) > 1:
        errors.append(f"{where}: with '*', no other policy event may be given")
    return errors


def admission_errors(job: dict) -> list[str]:
    """Volcano's create-time rules (ValidatingAdmissionPolicy + webhook)."""
    errors = []
    name = job.get("metadata", {}).get("name", "")
    if not _QUALIFIED.match(name) or len(name) > 63:
        errors.append(f"metadata.name: {name!r} is not a valid qualified name")
    spec = job.get("spec", {})
    tasks = spec.get("tasks", [])
    if not tasks:
        errors.append("spec.tasks: no task specified in job spec")
    names = [t.get("name") for t in tasks]
    if len(set(names)) != len(names):
        errors.append("spec.tasks: duplicated task name")
    total = 0
    for index, task in enumerate(tasks):
        where = f"spec.tasks[{index}]"
        replicas = task.get("replicas", 0)
        total += replicas
        if task.get("minAvailable", 0) > replicas:
            errors.append(f"{where}: 'minAvailable' is greater than 'replicas'")
        pod = f"{name}-{task.get('name')}-{max(replicas - 1, 0)}"
        if not _QUALIFIED.match(pod) or len(pod) > 63:
            errors.append(f"{where}: pod name {pod!r} is not a valid qualified name")
        errors += _policy_errors(task.get("policies", []), f"{where}.policies")
    if spec.get("minAvailable", 0) > total:
        errors.append("spec.minAvailable: job 'minAvailable' should not be greater than total replicas in tasks")
    errors += _policy_errors(spec.get("policies", []), "spec.policies")
    errors += [f"spec.plugins.{p}: unable to find job plugin" for p in spec.get("plugins", {}) if p not in PLUGINS]
    mounts = [v.get("mountPath") for v in spec.get("volumes", [])]
    if len(set(mounts)) != len(mounts):
        errors.append("spec.volumes: duplicated mountPath")
    return errors


def pod_template_errors(template: dict, where: str) -> list[str]:
    """Deserialise through kubernetes' V1PodTemplateSpec (client-side validation on) and
    compare the round trip: a field the models do not know would be dropped."""
    from kubernetes.client import ApiClient

    client = ApiClient()
    try:
        model = client._ApiClient__deserialize(template, "V1PodTemplateSpec")  # the client's own decoder
    except (ValueError, TypeError) as exc:
        return [f"{where}: {exc}"]
    back = client.sanitize_for_serialization(model)
    return [f"{where}: {e}" for e in _dropped(template, back, "")]


def _dropped(original: Any, back: Any, where: str) -> list[str]:
    if isinstance(original, dict):
        if not isinstance(back, dict):
            return [f"{where or '.'}: became {back!r}"]
        out = []
        for key, value in original.items():
            if key not in back:
                out.append(f"{where}.{key}: unknown field")
            else:
                out += _dropped(value, back[key], f"{where}.{key}")
        return out
    if isinstance(original, list):
        if not isinstance(back, list) or len(back) != len(original):
            return [f"{where}: list changed"]
        return [e for i, (a, b) in enumerate(zip(original, back, strict=True)) for e in _dropped(a, b, f"{where}[{i}]")]
    return [] if original == back else [f"{where}: {original!r} became {back!r}"]


def job_errors(job: dict) -> list[str]:
    """Every problem Volcano (CRD schema, admission) or Kubernetes (pod template) would raise."""
    errors = []
    if job.get("apiVersion") != "batch.volcano.sh/v1alpha1":
        errors.append(f"apiVersion: {job.get('apiVersion')!r} is not batch.volcano.sh/v1alpha1")
    if job.get("kind") != "Job":
        errors.append(f"kind: {job.get('kind')!r} is not Job")
    unknown = set(job) - {"apiVersion", "kind", "metadata", "spec", "status"}
    errors += [f"{key}: unknown top-level field" for key in sorted(unknown)]
    errors += schema_errors(job.get("spec"), SPEC, "spec")
    if errors:
        return errors
    errors += admission_errors(job)
    for index, task in enumerate(job["spec"].get("tasks", [])):
        errors += pod_template_errors(task.get("template", {}), f"spec.tasks[{index}].template")
    return errors
