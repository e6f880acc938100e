"""What torch.profiler names become in torch_npu.profiler (torch_npu 2.13), shared by the
profiler rules (NPU8xx). Every target is in the API table
(``npu_migrate/data/torch_npu_api.json``), and the table of names is the one torch_npu's
own run-time patcher applies (``torch_npu/contrib/transfer_to_npu.py``,
``_patch_profiler``)."""

from __future__ import annotations

SOURCE = "torch.profiler"
TARGET = "torch_npu.profiler"

#: torch.profiler name -> its members that map, member -> torch_npu member (None: no members)
NAMES: dict[str, dict[str, str] | None] = {
    "profile": None,
    "schedule": None,
    "tensorboard_trace_handler": None,
    "supported_activities": None,
    "ProfilerActivity": {"CPU": "CPU", "CUDA": "NPU"},
    "ProfilerAction": {m: m for m in ("NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE")},
}

#: torch.profiler names that work the same beside torch_npu.profiler: left alone
NEUTRAL = frozenset(
    {
        "record_function",
        "itt",
        "kineto_available",
        "register_optimizer_step_post_hook",
        "ExecutionTraceObserver",
        "KinetoStepTracker",
        "RecordScope",
        "DeviceType",
    }
)

#: keywords torch.profiler.profile and torch_npu.profiler.profile share, with one meaning
PROFILE_KEYWORDS = frozenset(
    {
        "activities",
        "schedule",
        "on_trace_ready",
        "record_shapes",
        "profile_memory",
        "with_stack",
        "with_flops",
        "with_modules",
        "execution_trace_observer",
        "custom_trace_id_callback",
    }
)

#: tensorboard_trace_handler parameters both have, in this order
HANDLER_PARAMETERS = ("dir_name", "worker_name")

#: torch.profiler.profile methods torch_npu.profiler.profile lacks
MISSING_METHODS = frozenset(
    {
        "key_averages",
        "events",
        "toggle_collection_dynamic",
        "prepare_trace",
        "start_trace",
        "stop_trace",
    }
)

#: export_stacks metrics: torch's -> torch_npu's ("self_npu_time_total")
STACK_METRICS = {
    "self_cuda_time_total": "self_npu_time_total",
    "self_device_time_total": "self_npu_time_total",
}

NPU_ACTIVITIES = (
    f"activities=[{TARGET}.ProfilerActivity.CPU, {TARGET}.ProfilerActivity.NPU]"
)
#: where the operator table is on Ascend, instead of key_averages()
OPERATOR_TABLE = (
    f"profile with {TARGET}.profile({NPU_ACTIVITIES}, "
    f"on_trace_ready={TARGET}.tensorboard_trace_handler(DIR)) and read the operator times from "
    "DIR/*_ascend_pt/ASCEND_PROFILER_OUTPUT/operator_details.csv and kernel_details.csv "
    "(or open DIR in MindStudio Insight); torch_npu.profiler.profile has no key_averages()"
)


def normalize(qualified: str | None) -> str | None:
    """``torch.profiler.profiler.profile`` -> ``torch.profiler.profile``; None outside torch.profiler."""
    if qualified is None:
        return None
    if qualified == "torch.profiler.profiler" or qualified.startswith("torch.profiler.profiler."):
        # (the module itself too: smollm's `from torch.profiler.profiler import ProfilerActivity,
        # profile`, whose uses were rewritten while the import stayed torch's)
        qualified = SOURCE + qualified[len("torch.profiler.profiler") :]
    if qualified == SOURCE or qualified.startswith(SOURCE + "."):
        return qualified
    return None


def mapped(qualified: str) -> str | None:
    """The torch_npu.profiler name for a (normalized) torch.profiler name, else None."""
    parts = qualified[len(SOURCE) + 1 :].split(".") if qualified != SOURCE else []
    if not parts or parts[0] not in NAMES:
        return None
    members = NAMES[parts[0]]
    if len(parts) == 1:
        return f"{TARGET}.{parts[0]}"
    if len(parts) == 2 and members is not None and parts[1] in members:
        return f"{TARGET}.{parts[0]}.{members[parts[1]]}"
    return None


def is_neutral(qualified: str) -> bool:
    parts = qualified[len(SOURCE) + 1 :].split(".") if qualified != SOURCE else [""]
    return parts[0] in NEUTRAL
