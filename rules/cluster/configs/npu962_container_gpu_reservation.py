"""NPU962: GPU reservations in docker-compose files and devcontainer.json."""

from __future__ import annotations

import re

from npu_migrate.rules.cluster.configs._containers import ROUTE

from npu_migrate.configs.rule import ConfigRule, Example

#: devcontainer.json ``runArgs`` that hand the container GPUs
_GPU_RUN_ARGS = ("--gpus", "--runtime=nvidia")


_K8S_ROUTE = ("with Ascend Device Plugin (MindCluster) a container asks for NPUs as `huawei.com/Ascend910: N` under "
              "`resources.limits` and `requests` (the resource name the cluster's device plugin advertises; "
              "Ascend Docker Runtime mounts the devices); not rewritten: the name depends on the cluster")


#: NVIDIA device plugin resource names (whole GPUs and MIG slices)
_NVIDIA_RESOURCE = re.compile(r"nvidia\.com/(?:gpu|mig-[\w.-]+)")
#: keys under which an NVIDIA resource name selects nodes or tolerates taints, not a request
_PLACEMENT = frozenset({"key", "tolerations", "nodeSelector", "matchExpressions", "nodeSelectorTerms"})
_HELM_ROUTE = ("set the chart's GPU count to 0 and ask for NPUs as the Ascend Device Plugin's `huawei.com/Ascend910: N` "
               "(a `resources` override where the chart has one, else its template's `resources.limits`); the serving "
               "image must be an Ascend one too (NPU963)")
_RUNTIME_CLASS_ROUTE = ("drop it, or name the RuntimeClass your cluster defines for Ascend Docker Runtime; the NPUs "
                        "themselves come from the Ascend Device Plugin (`huawei.com/Ascend910: N`)")


def _count(value: str) -> float | None:
    try:
        return float(value.strip())
    except ValueError:
        return None


class ContainerGpuReservation(ConfigRule):
    id = "NPU962"
    impact = "blocking"
    name = "container-gpu-reservation"
    fixable = False
    summary = ("Report GPU reservations in container files: compose `deploy.resources.reservations.devices` "
               "(`driver: nvidia`, `capabilities: [gpu]`), `runtime: nvidia`, devcontainer `--gpus`, `hostRequirements.gpu`, "
               "Kubernetes `limits`/`requests` `nvidia.com/gpu`, `runtimeClassName: nvidia`; Helm values' `requestGPU`, "
               "`nvidia.com/gpu` resource names")
    triggers = (b"nvidia", b"gpu", b"requestGPU")
    rationale = f"""
A docker-compose service asks for GPUs with
`deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, count: all,
capabilities: [gpu]}}]}}}}}}` or `runtime: nvidia`; a devcontainer.json with
`"runArgs": ["--gpus", "all"]` or `"hostRequirements": {{"gpu": true}}`. All of them
go through the NVIDIA container toolkit: on an Ascend host there is none, so the
container does not start, or starts without devices. Each such entry is reported
(the compose structure is recognised by its keys: `services.*.deploy...devices`,
`services.*.runtime`; a devcontainer by its root keys `runArgs` and
`hostRequirements`). Route: {ROUTE}. A Kubernetes container's `resources.limits` /
`requests` entry `nvidia.com/gpu` (a pod template, a RayCluster's worker group) goes
through NVIDIA's device plugin and is reported too: {_K8S_ROUTE}. The same entry
under any `limits`/`requests` map (a YAML anchor of shared resources,
`gpuWorkerResources: &w {{limits: {{nvidia.com/gpu: "4"}}}}` merged into pods with
`resources: *w`), a pod's `runtimeClassName: nvidia` (the NVIDIA container runtime's
RuntimeClass: {_RUNTIME_CLASS_ROUTE}) and, in Helm values, vLLM production-stack's
`requestGPU: N` (N > 0; left alone when the same entry's `requestGPUType` names another
vendor's resource, `amd.com/gpu`) and values naming an NVIDIA resource
(`requestGPUType: "nvidia.com/mig-4g.71gb"`) are reported: {_HELM_ROUTE}. Node selectors
and tolerations naming `nvidia.com/gpu` are not requests and are left alone. In a Helm
template (`{{{{ ... }}}}`) it is reported too: templates are read with their actions
blanked out (docs/decisions.md, "Templates"). Not rewritten: which NPUs a service gets,
and whether the host has Ascend Docker Runtime, are the deployment's choice.
"""
    examples = (
        Example(
            "services:\n  train:\n    image: trainer\n    deploy:\n      resources:\n        reservations:\n"
            "          devices:\n            - driver: nvidia  # reported\n              count: all\n"
        ),
        Example("services:\n  web:\n    image: nginx\n    runtime: runc\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._request = None  # the last `requestGPU` read, until its `requestGPUType`
        self._requests: list = []

    def leave_file(self) -> None:
        for scalar in self._requests:
            self.report(scalar, f"`requestGPU: {scalar.value}` asks the chart for NVIDIA GPUs (`nvidia.com/gpu` unless "
                        "`requestGPUType` says otherwise)", _HELM_ROUTE)

    def visit_scalar(self, scalar) -> None:
        keys = scalar.keys
        if scalar.is_key:
            if keys == ("hostRequirements", "gpu"):
                self.report(scalar, "`hostRequirements.gpu` asks the dev container host for a GPU", ROUTE)
            elif len(keys) >= 2 and keys[-1] == "nvidia.com/gpu" and keys[-2] in ("limits", "requests"):
                where = f"resources.{keys[-2]}" if len(keys) >= 3 and keys[-3] == "resources" else ".".join(keys[-3:-1])
                self.report(scalar, f"a Kubernetes container asks for `nvidia.com/gpu` in `{where}`", _K8S_ROUTE)
            return
        value = scalar.value
        last = keys[-1] if keys else None
        if last == "runtimeClassName" and value.strip().lower() == "nvidia":
            self.report(scalar, "`runtimeClassName: nvidia` runs the pod under the NVIDIA container runtime",
                        _RUNTIME_CLASS_ROUTE)
            return
        if last == "requestGPU" and (count := _count(value)) is not None and count > 0:
            self._request = scalar
            self._requests.append(scalar)  # reported at the end, unless its requestGPUType is another vendor's
            return
        if last == "requestGPUType" and self._request is not None and self._request.keys[:-1] == keys[:-1]:
            if not _NVIDIA_RESOURCE.fullmatch(value.strip()):
                self._requests.remove(self._request)
            self._request = None
        if _NVIDIA_RESOURCE.fullmatch(value.strip()) and not _PLACEMENT.intersection(keys):
            self.report(scalar, f"`{last}: {value}` names NVIDIA's device plugin resource", _HELM_ROUTE)
            return
        compose = len(keys) >= 3 and keys[0] == "services"
        if compose and "devices" in keys[2:] and "reservations" in keys[2:]:
            if keys[-1] == "driver" and value.lower() == "nvidia":
                self.report(scalar, "compose reserves NVIDIA devices (`driver: nvidia`)", ROUTE)
            elif keys[-1] == "capabilities" and value.lower() == "gpu":
                self.report(scalar, "compose reserves devices with the `gpu` capability", ROUTE)
        elif compose and len(keys) == 3 and keys[2] == "runtime" and value.lower() == "nvidia":
            self.report(scalar, "`runtime: nvidia` runs the service under the NVIDIA container runtime", ROUTE)
        elif keys == ("runArgs",) and (value in _GPU_RUN_ARGS or value.startswith("--gpus=")):
            self.report(scalar, f"devcontainer `runArgs` hands the container GPUs (`{value}`)", ROUTE)
