"""NPU611: CUDA metrics and CUDA-only switches of the profilers, reported with the NPU equivalent."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule

from ._common import NPU_ACTIVITIES, OPERATOR_TABLE, TARGET

#: CUDA metric of torch's profiler tables -> torch's device-generic name for it
CUDA_METRICS = {
    "cuda_time": "device_time",
    "cuda_time_total": "device_time_total",
    "self_cuda_time_total": "self_device_time_total",
    "cuda_memory_usage": "device_memory_usage",
    "self_cuda_memory_usage": "self_device_memory_usage",
}
_AUTOGRAD_PROFILE = frozenset(
    {
        "torch.autograd.profiler.profile",
        "torch.autograd.profiler_legacy.profile",
        "torch.autograd.profile",
    }
)
_PROFILING = re.compile(r"\b(?:profiler|key_averages)\b")
_EMIT_NVTX = frozenset(
    {"torch.autograd.profiler.emit_nvtx", "torch.autograd.emit_nvtx"}
)


def _metric_advice(metric: str) -> str:
    return (
        f"{OPERATOR_TABLE}; in torch.profiler tables the device-generic name of `{metric}` is "
        f'"{CUDA_METRICS[metric]}" (equal values; it is 0 where no device activity is recorded)'
    )


class ProfilerCudaMetrics(Rule):
    id = "NPU611"
    name = "profiler-cuda-metrics"
    summary = (
        'Report CUDA profiler metrics (sort_by="cuda_time_total", .cuda_time_total) and CUDA-only '
        "profiler switches (autograd profiler use_cuda, emit_nvtx) with the NPU equivalent"
    )
    fixable = False
    triggers = (*CUDA_METRICS, "use_cuda", "emit_nvtx")
    rationale = f"""
Profiling code names CUDA in places the device rules do not touch:

- **Sort keys and event fields**: `prof.key_averages().table(sort_by="cuda_time_total")`,
  `evt.self_cuda_time_total`, `cuda_memory_usage`... count CUDA kernel time and
  memory. On Ascend the device side is recorded by torch_npu.profiler, whose
  profile object has no `key_averages()`: {OPERATOR_TABLE}. torch's own
  device-generic names (`device_time_total`, `self_device_time_total`,
  `device_memory_usage`) hold the same values as the CUDA-named ones, so they
  are the right spelling for whatever stays on torch.profiler.
- **The autograd profiler's `use_cuda`**: `torch.autograd.profiler.profile(use_cuda=True)`
  asks for CUDA events; on Ascend use `{TARGET}.profile({NPU_ACTIVITIES})`.
  (`use_device="cuda"` is a device string: NPU104 rewrites it to `"npu"`.)
- **`torch.autograd.profiler.emit_nvtx()`** emits NVTX ranges for Nsight; the
  Ascend analogue is mstx (`torch.npu.mstx`), collected by torch_npu.profiler
  with `experimental_config={TARGET}._ExperimentalConfig(mstx=True)`.

These are reported, not rewritten: the replacement changes what is measured or
where the numbers appear, which is for the user to decide. NPU610 moves
torch.profiler code that maps exactly.
"""
    examples = (
        Example(
            "import torch\n"
            "with torch.autograd.profiler.profile(use_cuda=True) as prof:  # reported\n"
            "    model(x)\n"
            'print(prof.key_averages().table(sort_by="cuda_time_total"))  # reported\n'
        ),
        Example(
            'import torch\nprint(prof.key_averages().table(sort_by="cpu_time_total"))\n'
        ),
    )

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == "sort_by":
            metric = string_value(node.value)
            if metric in CUDA_METRICS:
                self.report(
                    node,
                    f'sort_by="{metric}" sorts by CUDA time or memory',
                    _metric_advice(metric),
                )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `cuda_time` alone is too common a name for a user's own timer: fields only
        # with their `_total` / `_usage` suffix, and only in files that profile
        metric = node.attr.value
        if (
            metric in CUDA_METRICS
            and metric != "cuda_time"
            and _PROFILING.search(self.ctx.text)
        ):
            self.report(
                node,
                f"`.{metric}` of a profiler event is CUDA time or memory",
                _metric_advice(metric),
            )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in _AUTOGRAD_PROFILE:
            use_cuda = call_arg(node, "use_cuda", 1)
            if use_cuda is not None and not _is_false(use_cuda.value):
                self.report(
                    use_cuda,
                    "the autograd profiler's `use_cuda` records CUDA events",
                    f"on Ascend profile with {TARGET}.profile({NPU_ACTIVITIES})",
                )
        elif qualified in _EMIT_NVTX:
            self.report(
                node,
                "`emit_nvtx()` emits NVTX ranges, which Ascend tools do not read",
                f"mark ranges with torch.npu.mstx (range_start / range_end, mark) and collect them with "
                f"{TARGET}.profile(experimental_config={TARGET}._ExperimentalConfig(mstx=True))",
            )


def _is_false(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value in ("False", "None")
