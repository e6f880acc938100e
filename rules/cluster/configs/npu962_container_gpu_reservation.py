"""NPU962: GPU reservations in docker-compose files and devcontainer.json."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.configs._containers import ROUTE

#: devcontainer.json ``runArgs`` that hand the container GPUs
_GPU_RUN_ARGS = ("--gpus", "--runtime=nvidia")


_K8S_ROUTE = ("with Ascend Device Plugin (MindCluster) a container asks for NPUs as `huawei.com/Ascend910: N` under "
              "`resources.limits` and `requests` (the resource name the cluster's device plugin advertises; "
              "Ascend Docker Runtime mounts the devices); not rewritten: the name depends on the cluster")


class ContainerGpuReservation(ConfigRule):
    id = "NPU962"
    impact = "blocking"
    name = "container-gpu-reservation"
    fixable = False
    summary = ("Report GPU reservations in container files: compose `deploy.resources.reservations.devices` "
               "(`driver: nvidia`, `capabilities: [gpu]`), `runtime: nvidia`, devcontainer `--gpus`, `hostRequirements.gpu`, "
               "Kubernetes `resources.limits`/`requests` `nvidia.com/gpu`")
    triggers = (b"nvidia", b"gpu")
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
through NVIDIA's device plugin and is reported too: {_K8S_ROUTE}. In a Helm
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

    def visit_scalar(self, scalar) -> None:
        keys = scalar.keys
        if scalar.is_key:
            if keys == ("hostRequirements", "gpu"):
                self.report(scalar, "`hostRequirements.gpu` asks the dev container host for a GPU", ROUTE)
            elif len(keys) >= 3 and keys[-1] == "nvidia.com/gpu" and keys[-2] in ("limits", "requests") \
                    and keys[-3] == "resources":
                self.report(scalar, f"a Kubernetes container asks for `nvidia.com/gpu` in `resources.{keys[-2]}`",
                            _K8S_ROUTE)
            return
        value = scalar.value
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
