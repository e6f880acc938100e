"""NPU933: transformers/accelerate switches for GPU-only compilation and FP8."""

from __future__ import annotations

import libcst as cst
from npu_migrate.rules.llm._routes import COMPILE

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example, Rule

FP8 = "Atlas A2/A3 NPUs have no FP8 matmul: use mixed_precision=\"bf16\""
GPU_BACKENDS = frozenset({"inductor", "cudagraphs", "tensorrt", "aot_ts_nvfuser", "nvprims_nvfuser", "fx2trt"})


class HfCompilePrecision(Rule):
    id = "NPU933"
    name = "hf-compile-precision"
    summary = "Report `TrainingArguments(torch_compile=True)`, accelerate's inductor dynamo backend and FP8 mixed precision"
    triggers = ("torch_compile", "torch_compile_backend", "dynamo_backend", "mixed_precision")
    fixable = False
    rationale = f"""
`TrainingArguments(torch_compile=True)` without a backend compiles with
inductor (transformers picks `hpu_backend` or `neuron` on those devices, never
an NPU one), and `Accelerator(dynamo_backend="inductor")` /
`TorchDynamoPlugin(backend=...)` do the same through accelerate; inductor makes
Triton kernels, which need triton-ascend on NPU (NPU914 has the torch_npu
facts). The `npu` backend that torch_npu registers (torchair graph mode) cannot
be selected there: {COMPILE}. `Accelerator(mixed_precision="fp8")` /
`TrainingArguments` FP8 recipes need FP8 matmuls: {FP8}.
"""
    examples = (
        Example("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='fp8')  # reported\n"),
        Example("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        keywords = {a.keyword.value: a for a in node.args if a.keyword is not None}
        compile_arg = keywords.get("torch_compile")
        backend = keywords.get("torch_compile_backend")
        backend_value = string_value(backend.value) if backend is not None else None
        if compile_arg is not None and isinstance(compile_arg.value, cst.Name) and compile_arg.value.value == "True":
            if backend is None or (backend_value or "").lower() in GPU_BACKENDS:
                self.report(compile_arg, "`torch_compile=True` compiles with inductor (Triton kernels for GPUs)", COMPILE)
        elif backend is not None and (backend_value or "").lower() in GPU_BACKENDS:
            self.report(backend, f'`torch_compile_backend="{backend_value}"` compiles with a GPU backend', COMPILE)
        dynamo = keywords.get("dynamo_backend")
        if dynamo is not None and (string_value(dynamo.value) or "").lower() in GPU_BACKENDS:
            self.report(dynamo, f'`dynamo_backend="{string_value(dynamo.value)}"` compiles with a GPU backend', COMPILE)
        precision = keywords.get("mixed_precision")
        if precision is not None and string_value(precision.value) == "fp8":
            self.report(precision, '`mixed_precision="fp8"` trains in FP8', FP8)
