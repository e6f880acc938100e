"""NPU975: SkyPilot task files that request NVIDIA GPUs (``resources: accelerators: A100:8``)."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.configs._jobspecs import ASCEND_K8S

#: SkyPilot task keys at the top of a task file (its YAML reference), besides ``resources``
_TASK_KEYS = frozenset({"run", "setup", "num_nodes", "workdir", "file_mounts", "envs", "service", "secrets"})
#: NVIDIA names of SkyPilot's catalog (``sky show-gpus -a``): A100, A100-80GB, H100, H200, L4,
#: L40S, T4, V100, A10G, GH200, B200, RTX4090, RTXPRO6000..., with an optional ``:count``
_NVIDIA = re.compile(r"(?:[ABHLTVKP]\d{1,3}[A-Z]?|G[BH]\d{3}|RTX\w*)(?:-[\w-]+)?(?::\s*\d+(?:\.\d+)?)?", re.IGNORECASE)

ROUTE = ("SkyPilot's accelerator catalog (`sky show-gpus -a`) has no Ascend NPU, so no `accelerators` value asks "
         "for one: launch the Ascend job outside SkyPilot (" + ASCEND_K8S + "), with the same `setup`/`run` "
         "commands, and keep this task file for the GPU path")


def _skypilot(document, path: str) -> bool:
    """A SkyPilot task file: named ``*.sky.yaml`` / under a ``skypilot`` directory, or with a
    top-level task key (``run``, ``setup``, ``num_nodes``...) next to ``resources``."""
    name = path.replace("\\", "/").lower()
    if name.endswith((".sky.yaml", ".sky.yml")) or "/skypilot/" in f"/{name}" or "/sky/" in f"/{name}":
        return True
    return any(s.is_key and len(s.keys) == 1 and s.keys[0] in _TASK_KEYS for s in document.scalars)


class SkyPilotAccelerators(ConfigRule):
    id = "NPU975"
    name = "skypilot-accelerators"
    impact = "blocking"
    fixable = False
    summary = ("Report SkyPilot task files whose `resources.accelerators` asks for NVIDIA GPUs "
               "(`A100:8`, `{H100: 8}`, lists): SkyPilot has no Ascend NPU to ask for")
    triggers = (b"accelerators",)
    rationale = f"""
A SkyPilot task file (`sky launch task.yaml`) asks for its machines with
`resources: accelerators:`, as a string (`A100:8`), a mapping (`{{H100: 8}}`), or a list or
set of candidates (also inside `resources.any_of` / `ordered`). SkyPilot's catalog
(`sky show-gpus -a`) lists NVIDIA GPUs, TPUs, AMD, Gaudi and AWS's chips, but no Ascend
NPU, so no value written here gets an Ascend machine: each NVIDIA name is reported. A
file counts as a SkyPilot task when it is named `*.sky.yaml`, sits in a `skypilot`/`sky`
directory, or has a task key (`run`, `setup`, `num_nodes`, `workdir`, `file_mounts`,
`envs`) at its top next to `resources`. Route: {ROUTE}. Not rewritten: there is no
value to write.
"""
    examples = (
        Example("resources:\n  accelerators: A100:8  # reported\nnum_nodes: 2\nrun: python train.py\n"),
        Example("resources:\n  accelerators: tpu-v4-8\nrun: python train.py\n"),
        Example("model:\n  accelerators: A100:8\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._found: list = []

    def visit_scalar(self, scalar) -> None:
        keys = scalar.keys
        if not keys or keys[0] != "resources" or "accelerators" not in keys[1:3]:
            return
        at = keys.index("accelerators", 1)
        # the value (`A100:8`, a list item), or a key of the mapping form (`{H100: 8}`)
        placed = len(keys) == at + (2 if scalar.is_key else 1)
        if placed and _NVIDIA.fullmatch(scalar.value.strip()):
            self._found.append(scalar)

    def leave_file(self) -> None:
        if self._found and _skypilot(self.file.document, self.file.path):
            for scalar in self._found:
                self.report(scalar, f"SkyPilot `accelerators: {scalar.value.strip()}` asks for NVIDIA GPUs", ROUTE)
