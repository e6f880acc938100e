"""NPU908: NVML (pynvml, nvidia-smi wrappers) queries."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

_SMI = "npu-smi info (Ascend driver CLI) reports temperature, power and health; there is no Python binding in torch_npu"

USES = {
    "pynvml.nvmlInit": "remove: torch.npu needs no initialisation call",
    "pynvml.nvmlShutdown": "remove: torch.npu needs no shutdown call",
    "pynvml.nvmlDeviceGetCount": "torch.npu.device_count()",
    "pynvml.nvmlDeviceGetHandleByIndex": "torch.npu functions take the device index directly; drop the handle",
    "pynvml.nvmlDeviceGetMemoryInfo": (
        "free, total = torch.npu.mem_get_info(index) (bytes); torch.npu.memory_allocated() / "
        "torch.npu.memory_reserved() for this process"
    ),
    "pynvml.nvmlDeviceGetUtilizationRates": "torch.npu.utilization(index)",
    "pynvml.nvmlDeviceGetName": "torch.npu.get_device_name(index)",
    "pynvml.nvmlDeviceGetTemperature": _SMI,
    "pynvml.nvmlDeviceGetPowerUsage": _SMI,
}


class Nvml(CudaOnlyPackage):
    id = "NPU908"
    impact = "blocking"
    name = "nvml"
    summary = "Report pynvml / nvidia-smi wrapper imports and NVML queries; suggest torch.npu / npu-smi equivalents"
    label = "NVML"
    packages = ("pynvml", "py3nvml", "nvidia_smi", "gpustat")
    problem = "NVML talks to the NVIDIA driver; on Ascend nvmlInit fails (no libnvidia-ml)"
    import_suggestion = (
        "use torch.npu.mem_get_info(i), torch.npu.utilization(i), torch.npu.device_count() and "
        "torch.npu.get_device_name(i); npu-smi info for temperature and power"
    )
    uses = USES
    triggers = ("pynvml", "py3nvml", "nvidia_smi", "gpustat")
    rationale = """
Monitoring code often asks NVML for memory, utilisation or device names. torch_npu
2.13 answers the common questions itself: `torch.npu.mem_get_info`,
`torch.npu.utilization`, `torch.npu.device_count`, `torch.npu.get_device_name`.
Temperature and power come from the Ascend driver's `npu-smi info` command.
"""
    examples = (
        Example("import pynvml  # reported\n"),
        Example("import torch\nimport torch_npu  # noqa: F401\nfree, total = torch.npu.mem_get_info(0)\n"),
    )
