"""NPU970: ``accelerator: gpu`` (or ``cuda``/``auto``) in Lightning trainer configs."""

from __future__ import annotations

import os
import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.python.npu960_lightning_accelerator import CUDA_OR_AUTO, ENTRY_POINTS, ROUTE


_GPU_COUNT = re.compile(r"-1|[1-9]\d*|\d+(?:\s*,\s*\d+)+,?")  # Lightning 1.x `gpus`: a count, -1, "0,1"


def lightning_config(document, path: str = "") -> bool:
    """A Hydra config (a top-level ``defaults:`` list), one naming a Lightning Trainer/Fabric in
    ``_target_``, or a file of a Hydra ``trainer`` config group (``configs/trainer/lm.yaml``):
    its top-level keys are the trainer's arguments."""
    parent = os.path.basename(os.path.dirname(path.replace("\\", "/")))
    return parent == "trainer" or any((s.is_key and s.keys == ("defaults",)) or (not s.is_key and s.key == "_target_" and
                                                         s.value in ENTRY_POINTS) for s in document.scalars)


def selects_device(scalar) -> str | None:
    """The finding's message when ``scalar`` is a Lightning trainer argument that picks no
    Ascend device (``accelerator: gpu|cuda|auto``, Lightning 1.x ``gpus: N``), else None."""
    if scalar.is_key:
        return None
    if scalar.key == "accelerator" and scalar.value in CUDA_OR_AUTO:
        return f"Lightning `accelerator: {scalar.value}` {CUDA_OR_AUTO[scalar.value]}"
    if scalar.key == "gpus" and _GPU_COUNT.fullmatch(scalar.value.strip()):
        return (f"Lightning 1.x `gpus: {scalar.value}` asks for CUDA devices (the `gpu` accelerator): on Ascend it "
                "raises that no GPU is available")
    return None


def reports(scalar, lightning: bool) -> bool:
    """NPU970 reports ``scalar``: a device choice under ``trainer``, or at the top of a Lightning/Hydra config."""
    if selects_device(scalar) is None:
        return False
    return "trainer" in scalar.keys[:-1] or (len(scalar.keys) == 1 and lightning)


class ConfigLightningAccelerator(ConfigRule):
    id = "NPU970"
    name = "config-lightning-accelerator"
    impact = "blocking"
    fixable = False
    summary = ("Report Lightning trainer configs (Hydra `trainer/*.yaml`, LightningCLI `trainer:`) whose "
               "`accelerator` is `gpu`, `cuda` or `auto`, or (Lightning 1.x) whose `gpus` asks for GPUs")
    triggers = (b"accelerator", b"gpus")
    rationale = f"""
The config-file form of NPU960. Lightning projects often build the `Trainer` from a
config: a Hydra config group (`configs/trainer/gpu.yaml` with `accelerator: gpu`,
instantiated through `_target_: lightning.pytorch.trainer.Trainer` or a `defaults:`
list that pulls that in) or a LightningCLI / NeMo file (`trainer:` then
`accelerator: gpu`). The value means the same as in the call: {", ".join(f'`{k}` {v}' for k, v in
CUDA_OR_AUTO.items())}. Reported: an `accelerator` value among those under a
`trainer` key, or at the top level of a file that names a Lightning `Trainer`/`Fabric`
in `_target_` or is a Hydra config (a top-level `defaults:` list). A file in a directory named `trainer` (a Hydra
config group: safari's `configs/trainer/lm.yaml`, `gpus: 8` and nothing else that says
Hydra) counts as such a config too. Other
`accelerator` keys (other tools' files) are left alone, and so is a `trainer` mapping
whose `_target_` names another class (sam2's `_target_: training.trainer.Trainer`: the
project's own trainer). Lightning 1.x's `gpus: N`
(a count, `-1` or `"0,1"`; lightning 1.x turned it into the `gpu` accelerator, 2.0 removed
it) is reported in the same places. Where NPU834 runs too, it leaves these values
to this rule (one finding per line). Route: {ROUTE}.
"""
    examples = (
        Example("trainer:\n  accelerator: gpu  # reported\n  devices: 8\n"),
        Example("accelerator: gpu\ndevices: 1\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._top: list = []  # top-level accelerator values, decided at the end
        self._nested: list = []  # values under a `trainer` key, decided at the end
        self._targets: dict[tuple, str] = {}  # mapping path -> its `_target_`
        self._lightning = False

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key:
            if scalar.keys == ("defaults",):
                self._lightning = True  # a Hydra config: its top-level keys are the instantiated object's
            return
        if scalar.key == "_target_":
            self._targets[tuple(scalar.keys[:-1])] = scalar.value
            if scalar.value in ENTRY_POINTS:
                self._lightning = True
        if selects_device(scalar) is None:
            return
        if "trainer" in scalar.keys[:-1]:
            self._nested.append(scalar)
        elif len(scalar.keys) == 1:
            self._top.append(scalar)

    def leave_file(self) -> None:
        for scalar in self._nested:
            # `trainer: {_target_: training.trainer.Trainer, accelerator: cuda}` (sam2) is the
            # project's own trainer, whose `accelerator` means what its code makes of it
            target = self._targets.get(tuple(scalar.keys[:-1]))
            if target is None or target in ENTRY_POINTS:
                self._report(scalar)
        if self._lightning or lightning_config(self.file.document, self.file.path):
            for scalar in self._top:
                self._report(scalar)

    def _report(self, scalar) -> None:
        self.report(scalar, selects_device(scalar), ROUTE)
