"""Facts shared by the job-spec rules (SkyPilot task files, Beaker experiment specs):
how an Ascend job asks for NPUs where the scheduler has them (plain data).

Sources: SkyPilot's "GPUs and Accelerators" page (docs.skypilot.co, `sky show-gpus -a`:
NVIDIA GPUs, Google TPUs, AMD, Gaudi, Trainium/Inferentia; no Ascend NPU) and its task YAML
reference (`resources.accelerators`: `A100:8`, `{A100: 8}`, a list or set of them);
beaker-py's `TaskResources` (`cpu_count`, `gpu_count`, `memory`, `shared_memory`: "Minimum
number of GPUs"; no other accelerator) and the `gpuCount` of its YAML spec; MindCluster's
Ascend Device Plugin user guide (pods request `huawei.com/Ascend910: N` under
`resources.limits`/`requests`).
"""

from __future__ import annotations

ASCEND_K8S = ("on Kubernetes with Ascend Device Plugin a pod asks for `huawei.com/Ascend910: N` under "
              "`resources.limits` and `requests` (MindCluster); on ModelArts, the job's Ascend flavor")
