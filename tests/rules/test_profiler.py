"""Focused tests for the profiler rules (NPU8xx) beyond the golden fixtures."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from npu_migrate.rules.profiler._common import PROFILE_KEYWORDS, mapped, normalize

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

from ._run import run

#: keywords of torch.profiler.profile that torch_npu.profiler.profile lacks
UNSHARED = ("use_cuda", "acc_events", "post_processing_timeout_s", "experimental_config")


def _findings(source: str, *rules: str) -> list[tuple[int, str]]:
    settings = Settings(selection=Selection.create([*rules, "NPU100"]))
    result = migrate_source("snippet.py", source.encode(), settings)
    assert result.error is None, result.error
    return sorted((f.line, f.message) for f in result.findings)


@hsettings(max_examples=60, deadline=None)
@given(
    shared=st.lists(st.sampled_from(sorted(PROFILE_KEYWORDS - {"activities"})), unique=True, max_size=4),
    unshared=st.lists(st.sampled_from(UNSHARED), unique=True, max_size=2),
    dotted=st.booleans(),
)
def test_profile_moves_exactly_when_every_keyword_is_shared(shared, unshared, dotted):
    prefix = "torch.profiler." if dotted else ""
    header = "import torch\n" if dotted else "import torch\nfrom torch.profiler import ProfilerActivity, profile\n"
    keywords = [f"activities=[{prefix}ProfilerActivity.CPU, {prefix}ProfilerActivity.CUDA]"]
    keywords += [f"{k}=None" for k in shared + unshared]
    source = f"{header}with {prefix}profile({', '.join(keywords)}) as prof:\n    prof.step()\n"
    out, findings = run(source, "NPU610")
    ast.parse(out)
    if unshared:
        assert out == source, "a file with a keyword torch_npu lacks must stay on torch.profiler"
        reported = {f.message for f in findings}
        assert len(findings) == len(unshared) + 1  # each keyword, and the CUDA activity left behind
        assert any("ProfilerActivity.CUDA" in m for m in reported)
    else:
        assert findings == []
        assert "ProfilerActivity.NPU" in out
        # CUDA is named only where the CPU path makes NPU another name of it
        assert [line for line in out.splitlines() if "CUDA" in line and "ProfilerActivity.NPU = " not in line] == []
        assert ("torch_npu.profiler.profile(" if dotted else "from torch_npu.profiler import") in out
    # a second run reports the same findings (none once the file has moved)
    assert _findings(out, "NPU610") == (_findings(source, "NPU610") if unshared else [])


def test_one_blocker_keeps_the_whole_file_on_torch_profiler():
    """torch's and torch_npu's ProfilerActivity are different enums: no mixing."""
    source = (
        "import torch\n"
        "from torch.profiler import ProfilerActivity, profile\n"
        "ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.CUDA]\n"
        "def fast(model, x):\n"
        "    with profile(activities=ACTIVITIES):\n"
        "        model(x)\n"
        "def table(model, x):\n"
        "    with profile(activities=ACTIVITIES) as prof:\n"
        "        model(x)\n"
        "    return prof.key_averages().table()\n"
    )
    out, findings = run(source, "NPU610")
    assert out == source
    assert [(f.line, f.rule) for f in findings] == [(3, "NPU610"), (10, "NPU610")]


def test_neutral_names_alone_are_left_alone():
    source = "import torch\nfrom torch.profiler import record_function\nwith record_function('x'):\n    pass\n"
    out, findings = run(source, "NPU610", "NPU611")
    assert out == source and findings == []


def test_import_split_keeps_aliases_and_layout():
    source = "import torch\nfrom torch.profiler import record_function as rf, profile as P, ProfilerActivity\nwith P(activities=[ProfilerActivity.CUDA]):\n    pass\n"
    out, _ = run(source, "NPU610")
    assert "from torch.profiler import record_function as rf\n" in out
    assert "from torch_npu.profiler import profile as P, ProfilerActivity\n" in out
    assert "ProfilerActivity.NPU" in out


@pytest.mark.parametrize(
    "qualified,target",
    [
        ("torch.profiler.profile", "torch_npu.profiler.profile"),
        ("torch.profiler.profiler.profile", "torch_npu.profiler.profile"),
        ("torch.profiler.ProfilerActivity.CUDA", "torch_npu.profiler.ProfilerActivity.NPU"),
        ("torch.profiler.ProfilerActivity.CPU", "torch_npu.profiler.ProfilerActivity.CPU"),
        ("torch.profiler.ProfilerAction.RECORD_AND_SAVE", "torch_npu.profiler.ProfilerAction.RECORD_AND_SAVE"),
        ("torch.profiler.ProfilerActivity.XPU", None),
        ("torch.profiler._ExperimentalConfig", None),
        ("torch.profiler.record_function", None),
    ],
)
def test_mapping(qualified, target):
    assert mapped(normalize(qualified)) == target


def test_export_stacks_metric_keeps_its_quotes():
    source = (
        "import torch\n"
        "with torch.profiler.profile(with_stack=True) as p:\n"
        "    pass\n"
        "p.export_stacks('s.txt', metric='self_cuda_time_total')\n"
    )
    out, _ = run(source, "NPU610")
    assert "p.export_stacks('s.txt', metric='self_npu_time_total')" in out


@pytest.mark.parametrize(
    "line,reported",
    [
        ('print(prof.key_averages().table(sort_by="cuda_time_total"))', True),
        ('print(prof.key_averages().table(sort_by="self_cpu_time_total"))', False),
        ("total = sum(e.self_cuda_time_total for e in prof.key_averages())", True),
        ("with torch.autograd.profiler.profile(use_cuda=True) as prof: pass", True),
        ("with torch.autograd.profiler.profile(use_cuda=False) as prof: pass", False),
        ("with torch.autograd.profiler.emit_nvtx(): pass", True),
    ],
)
def test_cuda_metrics_and_switches(line, reported):
    source = f"import torch\n{line}\n"
    out, findings = run(source, "NPU611")
    assert out == source
    assert bool(findings) is reported
    cst.parse_module(out)


def test_activities_from_elsewhere_keep_the_file_on_torch_profiler():
    """lingua's profiling.py: `activities=self.ACTIVITIES` of a base class from xformers holds
    torch's ProfilerActivity values, which torch_npu's profile would be handed."""
    source = (
        "import torch\n"
        "from xformers.profiler import PyTorchProfiler\n"
        "class Wandb(PyTorchProfiler):\n"
        "    def __init__(self):\n"
        "        self.prof = torch.profiler.profile(profile_memory=True, activities=self.ACTIVITIES)\n"
    )
    out, findings = run(source, "NPU610")
    assert out == source
    assert [(f.line, f.rule) for f in findings] == [(5, "NPU610")]
    assert "self.ACTIVITIES" in findings[0].message


@pytest.mark.parametrize("source", [
    "import torch\nfrom torch.profiler.profiler import ProfilerActivity, profile, tensorboard_trace_handler\n\n"
    "def run(path):\n    sched = torch.profiler.schedule(wait=0, warmup=0, active=1)\n"
    "    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,\n"
    "                 on_trace_ready=tensorboard_trace_handler(path)) as prof:\n"
    "        torch.ones(3).sum()\n        prof.step()\n",
    "import torch as th\n\ndef run(path):\n"
    "    with th.profiler.profile(activities=[th.profiler.ProfilerActivity.CUDA, th.profiler.ProfilerActivity.CPU],\n"
    "                             on_trace_ready=th.profiler.tensorboard_trace_handler(path)) as prof:\n"
    "        th.ones(3).sum()\n        prof.step()\n",
], ids=["from-import", "dotted"])
def test_the_migrated_profiling_runs_on_a_cpu_machine_without_torch_npu(tmp_path, source):
    """smollm's trainer profiled on CPU before the migration and stopped after it
    (ProfilerActivity.NPU on torch's enum, `torch_npu.profiler` unbound): the stand-ins
    keep that path running where torch_npu is missing."""
    import subprocess
    import sys

    migrated = migrate_source("train.py", source.encode(), Settings()).new_source
    assert migrated is not None and b"torch_npu.profiler" in migrated
    script = tmp_path / "train.py"
    script.write_bytes(migrated)
    code = f"import runpy; runpy.run_path({str(script)!r})['run']({str(tmp_path / 'trace')!r}); print('profiled')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "profiled" in done.stdout
