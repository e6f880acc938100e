"""Exercise the emulated torch_npu.profiler in one process; print a JSON report.

Run under ``npu-migrate emulate``. The schedule is compared with torch.profiler's
own for a grid of parameters, and the step / on_trace_ready sequence of a
profiled loop with the one torch.profiler gives for the same schedule.
"""

import itertools
import json
import os
import sys
import tempfile

import torch
import torch_npu
from torch import nn

report = {}


def outcome(fn):
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - we report every failure
        return {"ok": False, "type": type(exc).__name__, "msg": str(exc)[:300]}
    return {"ok": True, "value": value}


# the schedule: torch_npu's keywords and cycle are torch's ---------------------------------
mismatches = []
for wait, warmup, active, repeat, skip_first in itertools.product((0, 1, 3), (0, 2), (1, 2), (0, 2), (0, 3)):
    kwargs = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat, "skip_first": skip_first}
    npu, ref = torch_npu.profiler.schedule(**kwargs), torch.profiler.schedule(**kwargs)
    if [npu(s).name for s in range(40)] != [ref(s).name for s in range(40)]:
        mismatches.append(kwargs)
report["schedule_mismatches"] = mismatches


# a profiled loop: when traces are ready, and what is written ----------------------------------
def profiled(module, activities, trace_dir):
    ready = []
    handler = module.tensorboard_trace_handler(trace_dir)

    def on_ready(prof):
        ready.append(prof.step_num)
        handler(prof)

    model = nn.Linear(8, 8)
    x = torch.randn(4, 8)
    if module is torch_npu.profiler:
        model, x = model.npu(), x.npu()
    with module.profile(activities=activities, schedule=module.schedule(wait=1, warmup=1, active=2, repeat=2),
                        on_trace_ready=on_ready, record_shapes=True, with_stack=True) as prof:
        for _ in range(10):
            model(x).sum().backward()
            prof.step()
    return ready, prof


with tempfile.TemporaryDirectory() as tmp:
    npu_dir, ref_dir = os.path.join(tmp, "npu"), os.path.join(tmp, "ref")
    ready, prof = profiled(torch_npu.profiler,
                           [torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU], npu_dir)
    ref_ready, _ = profiled(torch.profiler, [torch.profiler.ProfilerActivity.CPU], ref_dir)
    report["ready"], report["ref_ready"] = ready, ref_ready
    report["ref_traces"] = len(os.listdir(ref_dir))
    spans = sorted(os.listdir(npu_dir))
    report["spans"] = [name.endswith("_ascend_pt") for name in spans]
    outputs = [os.path.join(npu_dir, s, "ASCEND_PROFILER_OUTPUT", "trace_view.json") for s in spans]
    report["trace_views"] = [os.path.getsize(p) > 0 for p in outputs]
    with open(outputs[0], encoding="utf-8") as fh:
        names = {event.get("name") for event in json.load(fh).get("traceEvents", [])}
    report["step_ranges_in_trace"] = sorted(n for n in names if n and n.startswith("ProfilerStep#"))
    report["linear_in_trace"] = "aten::linear" in names
    stacks = os.path.join(tmp, "stacks.txt")
    report["export_stacks"] = outcome(lambda: prof.export_stacks(stacks, "self_npu_time_total"))
    report["stacks_written"] = os.path.exists(stacks)

    # without a schedule: recorded from start to stop, saved at stop
    plain_dir = os.path.join(tmp, "plain")
    with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(plain_dir,
                                                                                               worker_name="w0")):
        nn.Linear(2, 2).npu()(torch.ones(1, 2, device="npu"))
    report["plain_spans"] = [name.startswith("w0_") for name in os.listdir(plain_dir)]

# what the real torch_npu.profiler does not have, the stand-in does not have either ------------
report["key_averages"] = hasattr(prof, "key_averages")
report["events"] = hasattr(prof, "events")
report["activities"] = sorted(a.name for a in torch_npu.profiler.supported_activities())
report["torch_activity"] = outcome(lambda: torch_npu.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]))
report["experimental_config"] = outcome(lambda: type(torch_npu.profiler.profile(
    experimental_config=torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,
        aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization))).__name__)
report["import_form"] = outcome(lambda: __import__("torch_npu.profiler", fromlist=["profile"]).profile.__name__)

print(json.dumps(report))
sys.stdout.flush()
