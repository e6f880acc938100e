"""NPU970: ``accelerator: gpu`` (or ``cuda``/``auto``) in Lightning trainer configs."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.python.npu960_lightning_accelerator import CUDA_OR_AUTO, ENTRY_POINTS, ROUTE


class ConfigLightningAccelerator(ConfigRule):
    id = "NPU970"
    name = "config-lightning-accelerator"
    impact = "blocking"
    fixable = False
    summary = ("Report Lightning trainer configs (Hydra `trainer/*.yaml`, LightningCLI `trainer:`) whose "
               "`accelerator` is `gpu`, `cuda` or `auto`")
    triggers = (b"accelerator",)
    rationale = f"""
The config-file form of NPU960. Lightning projects often build the `Trainer` from a
config: a Hydra config group (`configs/trainer/gpu.yaml` with `accelerator: gpu`,
instantiated through `_target_: lightning.pytorch.trainer.Trainer` or a `defaults:`
list that pulls that in) or a LightningCLI / NeMo file (`trainer:` then
`accelerator: gpu`). The value means the same as in the call: {", ".join(f'`{k}` {v}' for k, v in
CUDA_OR_AUTO.items())}. Reported: an `accelerator` value among those under a
`trainer` key, or at the top level of a file that names a Lightning `Trainer`/`Fabric`
in `_target_` or is a Hydra config (a top-level `defaults:` list). Other
`accelerator` keys (other tools' files) are left alone. Route: {ROUTE}.
"""
    examples = (
        Example("trainer:\n  accelerator: gpu  # reported\n  devices: 8\n"),
        Example("accelerator: gpu\ndevices: 1\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._top: list = []  # top-level accelerator values, decided at the end
        self._lightning = False

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key:
            if scalar.keys == ("defaults",):
                self._lightning = True  # a Hydra config: its top-level keys are the instantiated object's
            return
        if scalar.key == "_target_" and scalar.value in ENTRY_POINTS:
            self._lightning = True
        if scalar.key != "accelerator" or scalar.value not in CUDA_OR_AUTO:
            return
        if "trainer" in scalar.keys[:-1]:
            self._report(scalar)
        elif len(scalar.keys) == 1:
            self._top.append(scalar)

    def leave_file(self) -> None:
        if self._lightning:
            for scalar in self._top:
                self._report(scalar)

    def _report(self, scalar) -> None:
        self.report(scalar, f"Lightning `accelerator: {scalar.value}` {CUDA_OR_AUTO[scalar.value]}", ROUTE)
