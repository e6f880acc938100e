"""Held-out round 23's wrong edits, one family per test (VILA's `python -m` evaluation
launchers, ReaLHF's own `SequenceSample.cuda()`, its torch pinned in a Dockerfile, its Ray
totals beside computed requests and its setup.py; h2o-llmstudio's and RVC's thread settings
before a lazy torch import, RVC's DirectML backend, h2o's sliced device prefix, LMFlow's
device name looked up on torch). Each test fails on the engine of round 23's first pass
(540df27)."""

from __future__ import annotations

from ._files import write

FLASH_MODULE = "import flash_attn\nimport torch\n\nx = torch.ones(1).cuda()\n"
LAUNCHER = '''#!/bin/bash
gpu_list="${CUDA_VISIBLE_DEVICES:-0}"
IFS=',' read -ra GPULIST <<< "$gpu_list"
for IDX in 0 1; do
    CUDA_VISIBLE_DEVICES=${GPULIST[$IDX]} python -m pkg.eval.answer --chunk $IDX &
done
wait
python scripts/merge.py
'''


def test_a_module_launch_of_a_module_that_cannot_import_on_ascend_is_left(tmp_path, run_cli):
    """VILA: `CUDA_VISIBLE_DEVICES=... python -m llava.eval.model_vqa_loader`, a module that
    imports flash-attn through the project's model: renaming the mask pinned nothing on
    Ascend and unpinned every chunk on the GPU. The answer-merging script uses no torch."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/eval/__init__.py", "")
    write(tmp_path, "pkg/eval/answer.py", FLASH_MODULE)
    write(tmp_path, "scripts/merge.py", "import json\nimport argparse\n\nprint(json.dumps({}))\n")
    path = write(tmp_path, "scripts/eval.sh", LAUNCHER)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == LAUNCHER
    assert "`-m pkg.eval.answer`, the script this command runs, cannot be imported on Ascend" in result.output


def test_a_module_launch_of_an_ordinary_module_is_migrated(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/eval/__init__.py", "")
    write(tmp_path, "pkg/eval/answer.py", "import torch\n\nx = torch.ones(1).cuda()\n")
    write(tmp_path, "scripts/merge.py", "import torch\n")
    path = write(tmp_path, "scripts/eval.sh", LAUNCHER)
    run_cli("--write", "--no-cache", ".")
    assert path.read_text().count("ASCEND_RT_VISIBLE_DEVICES") == 2


def test_a_launch_of_a_script_without_torch_is_left(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n")
    write(tmp_path, "score.py", "import json\nfrom tqdm import tqdm\n\nprint(json.dumps([]))\n")
    source = "CUDA_VISIBLE_DEVICES=0 python score.py --answers a.jsonl\n"
    path = write(tmp_path, "score.sh", source)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == source
    assert "uses no torch (nor imports anything that does, nor starts a process)" in result.output


OWN_CUDA = '''import torch


class Sample:
    def __init__(self, data):
        self.data = data

    def cuda(self):
        self.data = {k: v.cuda() for k, v in self.data.items()}
        return self
'''
BATCHES = '''from typing import List

from .sample import Sample


def make_batches(n) -> List[Sample]:
    return [Sample({}) for _ in range(n)]
'''
USES = '''import torch

from .batches import make_batches
from .sample import Sample


def evaluate(model, loader):
    for step, data in enumerate(loader):
        data: Sample
        model(data.cuda())
    first = make_batches(1)[0].cuda()
    batches = make_batches(2)
    for i, batch in enumerate(batches):
        batch = batch.cuda()
    x = torch.ones(1).cuda()
    return first, batch, x
'''


def test_cuda_of_the_projects_own_class_stays(tmp_path, run_cli):
    """ReaLHF's `SequenceSample` defines `cuda()` and no `npu()`: `data.cuda()` became
    `data.npu()` (AttributeError on every machine). Left and reported, with the class's own
    `cuda()` (NPU010); a tensor's `.cuda()` beside it still changes."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    sample = write(tmp_path, "pkg/sample.py", OWN_CUDA)
    write(tmp_path, "pkg/batches.py", BATCHES)
    path = write(tmp_path, "pkg/evaluate.py", USES)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "model(data.cuda())" in text
    assert "make_batches(1)[0].cuda()" in text
    assert "batch = batch.cuda()" in text
    assert "x = torch.ones(1).npu()" in text
    assert sample.read_text() == OWN_CUDA
    assert result.output.count("a class of this project with its own `.cuda()`") == 3


CUSTOM_FWD = '''import torch
from torch.cuda.amp import custom_fwd


class Op(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, x):
        return x
'''


def test_a_torch_pinned_in_a_dockerfile_keeps_custom_fwd(tmp_path, run_cli):
    """ReaLHF installs torch 2.3.1 in its Dockerfile and CI: `torch.amp.custom_fwd`
    (torch 2.4) broke the import of its whole model there."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "Dockerfile", "FROM ubuntu:22.04\nRUN pip3 install torch==2.3.1\n")
    path = write(tmp_path, "ops.py", CUSTOM_FWD)
    result = run_cli("--write", "--no-cache", ".")
    assert "from torch.cuda.amp import custom_fwd" in path.read_text()
    assert "needs torch 2.4" in result.output and "==2.3.1" in result.output


RAY = '''import ray


def launch(schedules):
    total = ray.available_resources()["GPU"]
    for sch in schedules:
        Worker.options(num_gpus=sch.gpu).remote()
    return total
'''


def test_ray_totals_stay_beside_a_computed_gpu_request(tmp_path, run_cli):
    """ReaLHF's controller counted `available_resources()["NPU"]` for actors still
    requested with a computed `num_gpus=` (reported, not rewritten): KeyError on GPU
    clusters, and on Ascend a count of a resource the actors do not ask for."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "controller.py", RAY)
    result = run_cli("--write", "--no-cache", ".")
    assert 'ray.available_resources()["GPU"]' in path.read_text()
    assert "still asks for: that request is computed and left (NPU950, NPU953)" in result.output


def test_a_setup_script_that_builds_cuda_extensions_keeps_its_queries(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    source = ("import torch\nfrom torch.utils.cpp_extension import CUDA_HOME, CUDAExtension\n\n"
              "n = torch.cuda.device_count()\narchs = [torch.cuda.get_device_capability(i) for i in range(n)]\n")
    path = write(tmp_path, "setup.py", source)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == source
    assert "this setup script builds CUDA extensions" in result.output


THREADS = '''import os

# Set this before importing any other modules
os.environ["OMP_NUM_THREADS"] = "1"

import argparse
import sys


def run():
    import torch
    if torch.cuda.is_available():
        print(torch.cuda.memory_summary())
'''


def test_the_guard_follows_the_thread_settings_of_a_lazy_torch_import(tmp_path, run_cli):
    """h2o-llmstudio's train_wave.py: the guard (which imports torch through torch_npu) went
    above `OMP_NUM_THREADS=1`, which torch reads at import: the limit stopped working."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "train_wave.py", THREADS)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert text.index('os.environ["OMP_NUM_THREADS"] = "1"') < text.index("import torch_npu")


DIRECTML = '''import torch


def pick():
    try:
        import torch_directml
        return torch_directml.device()
    except ImportError:
        return torch.device("cuda")


def is_dml(device):
    return device.type == "privateuseone"
'''


def test_the_cpu_path_keeps_another_privateuse1_backend(tmp_path, run_cli):
    """RVC runs on DirectML, whose device type is `privateuseone`: the guard renamed that slot
    to "npu" on every machine without torch_npu, and its DirectML checks stopped matching."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "device.py", DIRECTML)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'torch.device("npu")' in text
    assert 'if importlib.util.find_spec("torch_directml") is None:\n        torch.utils.rename_privateuse1_backend' in text


SLICED = '''import torch


def publish(model, device="cuda:0"):
    if device == "cpu":
        pass
    elif device.startswith("cuda:") and device[5:].isdigit():
        pass
    else:
        raise ValueError("Use 'cpu' or 'cuda:INTEGER'.")
    model.to(device)
'''


def test_a_prefix_the_code_slices_by_its_length_stays(tmp_path, run_cli):
    """h2o-llmstudio: `device.startswith("npu:") and device[5:].isdigit()` rejected every
    NPU device ("npu:0"[5:] is "")."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "publish.py", SLICED)
    result = run_cli("--write", "--no-cache", ".")
    assert 'device.startswith("cuda:") and device[5:].isdigit()' in path.read_text()
    assert "which the code also slices at 5" in result.output


NAMESPACE = '''import torch


def get_device_name():
    if torch.cuda.is_available():
        device = "cuda"
    else:
        device = "cpu"
    return device


def get_torch_device():
    name = get_device_name()
    return getattr(torch, name)
'''


def test_a_device_name_looked_up_on_torch_follows_its_test(tmp_path, run_cli):
    """LMFlow's envs.py: the `torch.cuda.is_available()` test became the NPU's while the
    name it picks stayed "cuda", so `getattr(torch, name)` gave torch.cuda on Ascend."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "envs.py", NAMESPACE)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'if torch.npu.is_available():\n        device = "npu"' in text


CHOOSER = '''import torch


def pick(idx):
    cpu = torch.device("cpu")
    if not torch.cuda.is_available() or idx >= torch.cuda.device_count():
        return cpu, torch.float32
    major, minor = torch.cuda.get_device_capability(idx)
    if major >= 7:
        return torch.device(f"cuda:{idx}"), torch.float16
    return cpu, torch.float32


def training_dtype():
    if not torch.cuda.is_available():
        return torch.float32
    profiles = [pick(i) for i in range(torch.cuda.device_count())]
    if any(p[0].type != "cuda" for p in profiles):
        raise RuntimeError("unsupported device")
    return torch.float16


PROFILES = [pick(i) for i in range(2)]
INDEX = {device.index for device, _ in PROFILES if device.type == "cuda"}
DTYPE = training_dtype()
'''
USER = '''import torch

from config import pick


def load(device):
    if str(device).startswith("cuda"):
        index = torch.device(device).index or torch.cuda.current_device()
        device, dtype = pick(index)
    return torch.ones(1).to(device)


print(load("cuda:0"))
'''


def test_code_that_relies_on_a_device_picked_by_cuda_capability_stays_cudas(tmp_path, run_cli):
    """RVC's `get_device_dtype_sm` keeps its capability test (NPU011), so on Ascend it answers
    the CPU: its callers' tests and comparisons, renamed, raised "unsupported device" at the
    import of train.py and sent NPU requests down to the CPU. They stay with it."""
    (tmp_path / ".git").mkdir()
    config = write(tmp_path, "config.py", CHOOSER)
    user = write(tmp_path, "user.py", USER)
    result = run_cli("--write", "--no-cache", ".")
    text = config.read_text()
    assert 'if any(p[0].type != "cuda" for p in profiles):' in text
    assert 'if device.type == "cuda"}' in text
    assert "profiles = [pick(i) for i in range(torch.cuda.device_count())]" in text
    assert 'if str(device).startswith("cuda"):' in user.read_text()
    assert "picks the device by CUDA compute capability" in result.output


TOOLS = '''import GPUtil


def gpu_usage():
    gpus = GPUtil.getGPUs()
    return sum(g.load for g in gpus) / len(gpus)
'''
PAGE = '''import torch

from tools import gpu_usage


def stats():
    out = []
    if torch.cuda.is_available():
        out.append(gpu_usage())
    return out, torch.ones(1).cuda()


print(stats())
'''


def test_a_test_in_front_of_the_projects_nvidia_tooling_stays(tmp_path, run_cli):
    """h2o-llmstudio's home page: `if torch.npu.is_available(): get_gpu_usage()` divided by
    GPUtil's empty list of GPUs on Ascend (ZeroDivisionError)."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "tools.py", TOOLS)
    path = write(tmp_path, "page.py", PAGE)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "if torch.cuda.is_available():\n        out.append(gpu_usage())" in text
    assert "torch.ones(1).npu()" in text
    assert "reads NVIDIA's management tools" in result.output
