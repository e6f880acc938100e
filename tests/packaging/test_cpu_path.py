"""The CPU path keeps working (issue 35.4): a migrated repository still imports, and its
entry point starts, where neither torch_npu nor npu-runtime is installed (a CPU
development machine; an Ascend image built without npu-runtime), and says in one line
what it runs without.

The child processes import torch; ``sys.modules[name] = None`` makes ``import name``
raise ImportError there, as on a machine without the package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_project"
WITHOUT = "import sys; sys.modules['torch_npu'] = None; sys.modules['npu_runtime'] = None; "


def _migrated(tmp_path: Path) -> Path:
    repo = tmp_path / "cuda_project"
    shutil.copytree(EXAMPLE, repo)
    result = CliRunner().invoke(main, [str(repo), "--write", "--no-cache", "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return repo


def _python(repo: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT + code], cwd=repo, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_migrated_example_imports_and_starts_without_torch_npu_and_npu_runtime(tmp_path):
    repo = _migrated(tmp_path)
    train = (repo / "train.py").read_text()
    assert "if npu_runtime is not None:\n        npu_runtime.install()" in train
    imported = _python(repo, "import utils, model, data, train; print('tc is', utils.tc.__name__)")
    assert imported.returncode == 0, imported.stderr
    # the alias the migration moved under the guard means what it meant before the migration
    assert "tc is torch.cuda" in imported.stdout
    lines = [line for line in imported.stdout.splitlines() if "npu-runtime" in line]
    assert lines == [("npu-runtime is not installed: no launcher translation, HCCL defaults or hang watchdog "
                      "(pip install npu-runtime==0.1.0)")]
    started = _python(repo, "import runpy; sys.argv = ['train.py', '--help']; runpy.run_path('train.py', run_name='__main__')")
    assert started.returncode == 0, started.stderr
    assert "--device" in started.stdout and started.stdout.count("npu-runtime is not installed") == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_where_the_runtime_is_installed_install_runs(tmp_path):
    repo = _migrated(tmp_path)
    code = ("import sys, types; calls = []; sys.modules['npu_runtime'] = types.SimpleNamespace(install=lambda: calls.append(1)); "
            "sys.modules['torch_npu'] = None; import runpy; sys.argv = ['train.py', '--help']\n"
            "try:\n    runpy.run_path('train.py', run_name='__main__')\nexcept SystemExit:\n    pass\nprint('calls', calls)")
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "calls [1]" in result.stdout and "npu-runtime is not installed" not in result.stdout


#: CUDA code whose CPU behaviour a migration must keep: each prints what it computed on a
#: machine without CUDA. Migrated, with torch_npu missing, it must print the same.
CPU_BEHAVIOUR = {
    "autocast_off_regions": '''\
import torch


@torch.amp.autocast(device_type="cuda", enabled=False)
def stable(x):
    return x.float() * 2


with torch.autocast("cuda", enabled=False):
    print(stable(torch.ones(2, dtype=torch.float16)).dtype)
''',
    "autocast_on_is_off_without_the_device": '''\
import warnings

import torch

warnings.simplefilter("ignore")
with torch.autocast(device_type="cuda", dtype=torch.float16):
    print((torch.ones(2, 2) @ torch.ones(2, 2)).dtype, torch.is_autocast_enabled("cuda"))
''',
    "torch_imported_only_by_from_imports": '''\
from torch import ones
from torch.cuda.amp import autocast

with autocast(enabled=False):
    print(ones(2).dtype)
''',
    # an env report that imports torch in a try of its own and in functions (composer's
    # collect_env.py, trl's `trl env`): torch.npu is a module there, and torch is bound
    # only where it is installed
    "torch_in_a_try_and_in_functions": '''\
"""Environment report."""

import os

try:
    import torch.utils.data
    from torch.cuda import device_count as cuda_device_count
    from torch.cuda import is_available as cuda_available

    TORCH_AVAILABLE = True
except ImportError:
    TORCH_AVAILABLE = False


def report():
    import torch

    return torch.cuda.is_available(), TORCH_AVAILABLE and cuda_available(), cuda_device_count()


print(report(), os.sep)
''',
    "mock_patch_targets_in_a_test_without_import_torch": '''\
from unittest import mock


def probe():
    import torch

    return torch.cuda.current_device()


with mock.patch("torch.cuda.current_device", return_value=7):
    print(probe())
''',
    "device_choice_and_tensor_tests": '''\
import torch

device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
x = torch.ones(1, device=device)
print(device.type, "gpu" if x.is_cuda else "host", torch.cuda.device_count())
torch.cuda.manual_seed_all(0)
''',
    # torch turns a CUDA GradScaler off without CUDA and leaves an "npu" one on: its scale is a
    # power of two, so the steps it takes are the same, bit for bit
    "grad_scaler_steps": '''\
import warnings

import torch
from torch.cuda.amp import GradScaler

warnings.simplefilter("ignore")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = GradScaler()
for _ in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
print([p.tolist() for p in model.parameters()])
''',
    # axolotl's PoLoRA: save, switch off and restore the TF32 flag; without torch_npu the
    # migrated read falls back to the original flag, so the save and the restore still agree
    "tf32_save_and_restore": '''\
import torch

prev = torch.backends.cuda.matmul.allow_tf32
torch.backends.cuda.matmul.allow_tf32 = False
try:
    print((torch.ones(2, 2) @ torch.ones(2, 2)).tolist())
finally:
    torch.backends.cuda.matmul.allow_tf32 = prev
print(prev, torch.backends.cuda.matmul.allow_tf32)
''',
    # dinov2's deformable attention: pure PyTorch under custom_fwd/custom_bwd, whose wrappers
    # ask torch.get_autocast_dtype(device_type) on every call; "npu" must parse without torch_npu
    "custom_fwd_and_bwd": '''\
import torch
from torch.cuda.amp import custom_bwd, custom_fwd


class Double(torch.autograd.Function):
    @staticmethod
    @custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        return grad * 2


x = torch.ones(2, requires_grad=True)
Double.apply(x).sum().backward()
print(x.grad.tolist())
''',
    # Open-Sora's vae/train.py: profiler imports moved to torch_npu.profiler must not stop
    # the file from importing where torch_npu is missing (profiling is off by default)
    "profiler_imports_with_profiling_off": '''\
import torch
import torch.profiler as tp
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def train(profiling=False):
    if profiling:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, active=1),
                     on_trace_ready=tp.tensorboard_trace_handler("log")) as prof:
            prof.step()
    with record_function("step"):
        return torch.ones(2).sum().item()


print(train())
''',
    # lingua's weight init: NPU110 adds device_type="npu", which the guard makes a device type
    # torch knows where torch_npu is missing (the devices list, two calls deep, is empty there)
    "fork_rng_over_device_indices": '''\
import torch

torch.manual_seed(0)
with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
    torch.manual_seed(1)
    inside = torch.rand(2).tolist()
print(inside, torch.rand(2).tolist())
''',
}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(CPU_BEHAVIOUR))
def test_migrated_code_computes_on_the_cpu_what_the_original_did(tmp_path, name):
    from npu_migrate.pipeline.selection import Selection
    from npu_migrate.pipeline.settings import Settings
    from npu_migrate.python.engine import migrate_source

    original = CPU_BEHAVIOUR[name]
    result = migrate_source("train.py", original.encode(), Settings(selection=Selection.create(["ALL"])))
    assert result.new_source is not None, "the example has nothing to migrate"
    migrated = result.new_source.decode()
    outputs = []
    for source in (original, migrated):
        (tmp_path / "train.py").write_text(source)
        run = _python(tmp_path, "import runpy; runpy.run_path('train.py', run_name='__main__')")
        assert run.returncode == 0, f"{source}\n{run.stderr}"
        # an entry point also says, once, that it runs without npu-runtime (tested above)
        outputs.append([line for line in run.stdout.splitlines() if "npu-runtime is not installed" not in line])
    assert outputs[1] == outputs[0], migrated
