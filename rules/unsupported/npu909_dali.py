"""NPU909: NVIDIA DALI input pipelines."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage


class Dali(CudaOnlyPackage):
    id = "NPU909"
    impact = "blocking"
    name = "nvidia-dali"
    summary = "Report NVIDIA DALI imports; suggest a torch DataLoader pipeline"
    label = "NVIDIA DALI"
    packages = ("nvidia.dali",)
    problem = "DALI decodes and augments on NVIDIA GPUs; it has no Ascend backend"
    import_suggestion = (
        "rebuild the pipeline as a torch.utils.data.Dataset + DataLoader(num_workers=..., pin_memory=True) with "
        "torchvision transforms on the host; DALIGenericIterator batches map to the DataLoader's batches"
    )
    triggers = ("dali",)
    rationale = """
DALI pipelines (`nvidia.dali.fn`, `pipeline_def`, `DALIGenericIterator`) run their
decoding and augmentation on CUDA devices. On Ascend the portable replacement is
a regular `DataLoader` with host-side transforms; device-side decode would need
Ascend's own media stack, which is out of scope here.
"""
    examples = (
        Example("from nvidia.dali.plugin.pytorch import DALIGenericIterator  # reported\n"),
        Example("from torch.utils.data import DataLoader\n"),
    )
