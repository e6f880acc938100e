"""The reference twin's run-time layer (npu_migrate/verify/cuda_on_npu.py) in a real
process on the emulated NPU: CUDA calls answer as on a CUDA machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from npu_migrate.verify import twins

pytestmark = pytest.mark.slow

PROBE = """
import torch
from npu_migrate.verify import cuda_on_npu
cuda_on_npu.install()
props = torch.cuda.get_device_properties(torch.device("cuda"))
# lucidrains/denoising-diffusion-pytorch's attend.py picks its attention kernels so
assert (props.major, props.minor) == torch.cuda.get_device_capability(), (props.major, props.minor)
assert props.total_memory == torch.npu.get_device_properties(0).total_memory
assert torch.cuda.get_device_properties(0).major == 8
print("ok")
"""


@pytest.mark.timeout(120)
def test_device_properties_carry_the_compute_capability(tmp_path, emulator_build):
    env = twins.npu_env(twins.base_env(tmp_path / "out", 1, 0), 1, True)
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=110, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


PROJECT_PROBE = """
import torch
from npu_migrate.verify import cuda_on_npu
cuda_on_npu.install()
device = torch.accelerator.current_accelerator()  # the project's own call: CUDA's answer
assert device.type == "cuda", device
model = torch.nn.Linear(2, 2)
if device.type == "cuda":  # pytorch/examples imagenet's branch
    model.cuda(device)
x = torch.ones(1, 2).to(device)
assert x.device.type == "npu" and model.weight.device.type == "npu", (x.device, model.weight.device)
assert model(x).device.type == "npu"
# a library's calls (a module outside the project) and code without a file keep the npu
import library
assert library.accelerator().type == "npu"
assert eval("torch.accelerator.current_accelerator()").type == "npu"
print("ok")
"""


@pytest.mark.timeout(120)
def test_the_projects_accelerator_is_cuda_and_torchs_the_npu(tmp_path, emulator_build):
    project = tmp_path / "project"
    project.mkdir()
    (project / "probe.py").write_text(PROJECT_PROBE)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "library.py").write_text("import torch\n\n\ndef accelerator():\n"
                                                 "    return torch.accelerator.current_accelerator()\n")
    env = twins.npu_env(twins.base_env(tmp_path / "out", 1, 0), 1, True)
    env["NPU_MIGRATE_VERIFY_ROOT"] = str(project)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "lib"), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "probe.py"], env=env, cwd=project, capture_output=True, text=True,
                          timeout=110, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


FSDP_PROBE = """
import sys
from npu_migrate.verify import hook
hook.boot()
# FSDP's import (torch.distributed.tensor, ~0.7 s of CPU) is left to the scripts that use it
assert "torch.distributed.fsdp" not in sys.modules
from torch.distributed.fsdp import FullyShardedDataParallel
init = FullyShardedDataParallel.__init__
# both layers wrap it when it is imported, in boot's order: the recorder's over the reference's
assert init.__name__ == "__init__" and getattr(init.__wrapped__, "_npu_migrate_cuda_on_npu", False), init
print("ok")
"""


@pytest.mark.timeout(120)
def test_fsdp_is_wrapped_when_the_script_imports_it_not_before(tmp_path, emulator_build):
    env = twins.reference_env(twins.base_env(tmp_path / "out", 1, 0), 1, True)
    proc = subprocess.run([sys.executable, "-c", FSDP_PROBE], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=110, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


FSDP2_PROBE = """
import os
import sys
from npu_migrate.verify import hook
recorder = hook.boot()
assert "torch.distributed.fsdp" not in sys.modules
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard  # FSDP2 (the HF Trainer's FSDP since transformers 5)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["PROBE_PORT"], rank=0, world_size=1)
mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (1,))
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
fully_shard(model[0], mesh=mesh)
fully_shard(model, mesh=mesh)
assert type(fully_shard.state(model)).__name__ == "FSDPState"  # its .state survives the wrapper
assert recorder.paths["wrappers"] == ["fully_shard", "fully_shard"], recorder.paths["wrappers"]
dist.destroy_process_group()
print("ok")
"""


@pytest.mark.timeout(120)
def test_fsdp2_fully_shard_calls_are_recorded_as_wrappers(tmp_path, emulator_build):
    env = twins.npu_env(twins.base_env(tmp_path / "out", 1, 0), 1, True)
    env["PROBE_PORT"] = str(twins._free_port())
    proc = subprocess.run([sys.executable, "-c", FSDP2_PROBE], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=110, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
