"""NPU910: TensorRT / Torch-TensorRT."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage


class TensorRT(CudaOnlyPackage):
    id = "NPU910"
    impact = "blocking"
    name = "tensorrt"
    summary = "Report TensorRT / Torch-TensorRT imports"
    label = "TensorRT"
    packages = ("tensorrt", "torch_tensorrt")
    problem = "TensorRT is NVIDIA's inference runtime; it does not exist on Ascend"
    import_suggestion = (
        "run the PyTorch model on the npu device (optionally torch.compile(model, backend=\"npu\")), or export it "
        "to ONNX and convert it with CANN's ATC tool to an Ascend offline model"
    )
    triggers = ("tensorrt", "torch_tensorrt")
    rationale = """
TensorRT engines are built for NVIDIA GPUs. On Ascend, inference either stays in
PyTorch (eager, or `torch.compile(backend="npu")`, torch_npu's bundled torchair
graph mode) or goes through CANN's model conversion (ONNX -> ATC -> offline
model). Which one fits is a deployment decision, so this is only reported.
"""
    examples = (
        Example("import tensorrt as trt  # reported\n"),
        Example("import torch\nmodel = torch.compile(model, backend='npu')\n"),
    )
