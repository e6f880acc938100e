"""NPU976: Beaker experiment specs that request GPUs (``tasks: - resources: gpuCount: 8``)."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.configs._jobspecs import ASCEND_K8S

_COUNT = re.compile(r"[1-9]\d*")
ROUTE = ("Beaker's task resources count GPUs only (beaker-py `TaskResources`: `cpu_count`, `gpu_count`, `memory`, "
         "`shared_memory`), so a Beaker spec cannot ask for an Ascend NPU: run the Ascend job on an Ascend "
         "cluster instead (" + ASCEND_K8S + "), with the spec's command, arguments and environment, and keep "
         "this spec for the GPU path")


def _beaker(document) -> bool:
    """A Beaker spec: a top-level ``version: v2...`` or ``budget``, or a task image from Beaker
    (``tasks[].image.beaker``)."""
    for s in document.scalars:
        if s.is_key and (s.keys == ("budget",) or s.keys == ("tasks", "image", "beaker")):
            return True
        if not s.is_key and s.keys == ("version",) and s.value.startswith("v2"):
            return True
    return False


class BeakerGpuCount(ConfigRule):
    id = "NPU976"
    name = "beaker-gpu-count"
    impact = "blocking"
    fixable = False
    summary = "Report Beaker experiment specs whose tasks request GPUs (`resources: gpuCount: N`): Beaker has no NPU request"
    triggers = (b"gpuCount",)
    rationale = f"""
An experiment spec for AI2's Beaker (`beaker experiment create spec.yaml`, open-instruct's
`configs/beaker_configs/*.yaml`) asks for each task's GPUs with `tasks: - resources:
gpuCount: N`. Beaker's task resources have a GPU count and nothing else for
accelerators (beaker-py's `TaskResources`), so the spec cannot be pointed at Ascend NPUs:
every `gpuCount` above 0 is reported, in files that are Beaker specs (a top-level
`version: v2...` or `budget`, or a task `image: beaker: ...`). Route: {ROUTE}. Never
rewritten. Python launchers that build the same dict for beaker-py are not read by this rule.
"""
    examples = (
        Example("version: v2\ntasks:\n  - name: train\n    image:\n      beaker: ai2/cuda11.8-ubuntu20.04\n"
                "    resources:\n      gpuCount: 8  # reported\n"),
        Example("version: v2\ntasks:\n  - name: eval\n    resources:\n      gpuCount: 0\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._found: list = []

    def visit_scalar(self, scalar) -> None:
        if not scalar.is_key and scalar.keys == ("tasks", "resources", "gpuCount") and _COUNT.fullmatch(scalar.value.strip()):
            self._found.append(scalar)

    def leave_file(self) -> None:
        if self._found and _beaker(self.file.document):
            for scalar in self._found:
                self.report(scalar, f"Beaker `gpuCount: {scalar.value.strip()}` asks for GPUs; Beaker has no NPU request", ROUTE)
