"""Pod pieces the Kubernetes targets (Volcano Job, AscendJob) share, from what MindCluster's
device plugin and Volcano's scheduler need:

- the NPU resource (``huawei.com/Ascend910`` by default: the device plugin names its
  910/910B resource so; ``--npu-resource`` keeps another choice) as request and limit;
- ``ASCEND_VISIBLE_DEVICES`` from the pod annotation of the same name, which the device
  plugin writes with the NPUs it allocated (Ascend Docker Runtime mounts those);
- a ``nodeSelector`` on the device plugin's node labels ``accelerator-type`` (the server
  model, e.g. ``module-910b-8`` for an 8-NPU Atlas 800T A2) and ``host-arch``
  (``huawei-arm`` / ``huawei-x86``), so an 8-card pod never lands on a smaller server;
- one pod per node: a required pod anti-affinity on ``kubernetes.io/hostname``;
- optional hostPath mounts of the driver and ``npu-smi`` for clusters without Ascend
  Docker Runtime (``--driver-mounts``);
- a memory-backed ``/dev/shm`` (DataLoader workers);
- multi-node: HCCL's 16 ports (``HCCL_IF_BASE_PORT``, 60000) kept out of the pod's
  ephemeral port range with the pod sysctl ``net.ipv4.ip_local_port_range`` (namespaced,
  and on the kubelet's safe list in every Kubernetes release, unlike
  ``ip_local_reserved_ports``, safe only from 1.27): a pod's network namespace starts
  with the kernel's 32768-60999, where any outgoing connection could take an HCCL port
  first, and the node preflight in the pod stops the launch on it.
"""

from __future__ import annotations

from ..plan import LaunchPlan

# Where the driver lives on an Ascend host, mounted read-only where no Ascend Docker Runtime does it.
DRIVER_MOUNTS = (
    ("ascend-driver", "/usr/local/Ascend/driver"),
    ("ascend-add-ons", "/usr/local/Ascend/add-ons"),
    ("npu-smi", "/usr/local/bin/npu-smi"),
    ("dcmi", "/usr/local/dcmi"),
    ("ascend-install-info", "/etc/ascend_install.info"),
)


def npu_resources(plan: LaunchPlan) -> dict:
    npus = {plan.npu_resource: str(plan.cards)}
    return {"requests": dict(npus), "limits": dict(npus)}


def visible_devices_env(plan: LaunchPlan) -> dict:
    return {"name": "ASCEND_VISIBLE_DEVICES",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{plan.npu_resource}']"}}}


def node_selector(plan: LaunchPlan) -> dict:
    return {"accelerator-type": plan.accelerator_type, "host-arch": plan.host_arch}


def one_pod_per_node(label: str, value: str) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]},
         "topologyKey": "kubernetes.io/hostname"}]}}


def volumes(plan: LaunchPlan) -> tuple[list[dict], list[dict]]:
    """(volumeMounts, volumes): /dev/shm, and the driver where asked."""
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    vols = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if plan.driver_mounts:
        for name, path in DRIVER_MOUNTS:
            mounts.append({"name": name, "mountPath": path, "readOnly": True})
            vols.append({"name": name, "hostPath": {"path": path}})
    return mounts, vols


EPHEMERAL = (32768, 60999)  # the kernel's default net.ipv4.ip_local_port_range


def security_context(plan: LaunchPlan) -> dict | None:
    """The pod sysctl that keeps HCCL's ports out of the ephemeral range (multi-node jobs),
    or None where they already lie outside it (or the base port is not a number here)."""
    raw = dict(plan.env).get("HCCL_IF_BASE_PORT", "60000")
    if not plan.multi_node or not raw.isdigit():
        return None
    low, high = EPHEMERAL
    first, last = int(raw), int(raw) + 15
    if last < low or first > high:
        return None
    below, above = first - low, high - last  # the larger side stays ephemeral
    span = f"{low} {first - 1}" if below >= above else f"{last + 1} {high}"
    return {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": span}]}
