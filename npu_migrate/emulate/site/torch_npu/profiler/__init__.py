"""Stand-in ``torch_npu.profiler`` of the emulated NPU.

The same names, signatures and step/schedule behaviour as torch_npu 2.13's
``torch_npu.profiler``, so that profiling code migrated from ``torch.profiler``
runs on the emulator. What it records is torch's own CPU trace (the emulated
NPU computes on the CPU): ``tensorboard_trace_handler`` writes it, as a Chrome
trace, to ``<dir>/<worker>_<pid>_<time>_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json``,
where torch_npu writes its analysed Ascend trace. Like the real profiler, a
``profile`` has no ``key_averages()`` or ``events()``.
"""

from __future__ import annotations

from ._config import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from ._profile import (
    ProfilerActivity,
    profile,
    supported_activities,
    tensorboard_trace_handler,
)
from ._schedule import ProfilerAction, Schedule

schedule = Schedule

__all__ = [
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "_ExperimentalConfig",
    "profile",
    "schedule",
    "supported_activities",
    "supported_ai_core_metrics",
    "supported_export_type",
    "supported_profiler_level",
    "tensorboard_trace_handler",
]
