"""NPU834: launcher configs that select GPUs: accelerate's ``MULTI_GPU``, Lightning's ``accelerator: gpu``."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster.configs.npu970_config_lightning_accelerator import lightning_config, reports

_LIGHTNING = (
    "Lightning's `gpu`/`cuda` accelerator drives CUDA devices and Lightning ships no Ascend accelerator: "
    "register an NPU accelerator (a lightning Accelerator subclass that uses torch.npu) or run the "
    "training loop with plain torch and device npu"
)


class ConfigGpuLauncher(ConfigRule):
    id = "NPU834"
    name = "config-gpu-launcher"
    summary = "Use accelerate's `MULTI_NPU` for `distributed_type: MULTI_GPU`; report Lightning's `accelerator: gpu`"
    triggers = (b"MULTI_GPU", b"gpu", b"cuda")
    rationale = """
An accelerate config (`accelerate config` writes
`~/.cache/huggingface/accelerate/default_config.yaml`, projects keep copies)
selects the distributed type: accelerate has `MULTI_NPU` for Ascend, and its
launcher then sets `ASCEND_RT_VISIBLE_DEVICES` from `gpu_ids` and HCCL as the
backend, so `distributed_type: MULTI_GPU` becomes `MULTI_NPU`.

A PyTorch Lightning config (`trainer: {accelerator: gpu}`, Hydra's
`trainer/gpu.yaml`) selects CUDA devices, and Lightning has no Ascend
accelerator of its own: `accelerator: gpu` and `accelerator: cuda` are
reported (NPU832 does not report `gpu`, which is not a torch device). Where NPU970
runs too, the Lightning trainer's own `accelerator` (under `trainer:`, or at the top of
a Hydra or Lightning config) is left to it, so the line has one finding.
"""
    examples = (
        Example("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\ngpu_ids: all\nnum_processes: 8\n",
                "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_NPU\ngpu_ids: all\nnum_processes: 8\n"),
        Example("trainer:\n  accelerator: gpu  # reported\n  devices: 8\n"),
        Example("distributed_type: MULTI_CPU\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self._accelerators: list = []

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key or scalar.key is None:
            return
        if scalar.key == "distributed_type" and scalar.value == "MULTI_GPU":
            if scalar.editable:
                self.replace(scalar, "MULTI_NPU", "accelerate `MULTI_GPU` -> `MULTI_NPU`")
            else:
                self.report(scalar, "accelerate's `MULTI_GPU` selects CUDA devices", "write `MULTI_NPU`")
        elif scalar.key == "accelerator" and scalar.value.lower() in ("gpu", "cuda"):
            self._accelerators.append(scalar)

    def leave_file(self) -> None:
        # NPU970 reports the Lightning trainer's own `accelerator` (under `trainer`, or at the top of
        # a Hydra/Lightning config) with the route; the others stay here, one finding per line
        lightning = "NPU970" in self.file.active and lightning_config(self.file.document, self.file.path)
        for scalar in self._accelerators:
            if "NPU970" in self.file.active and reports(scalar, lightning):
                continue
            self.report(scalar, f"`accelerator: {scalar.value}` selects CUDA devices (PyTorch Lightning)", _LIGHTNING)
