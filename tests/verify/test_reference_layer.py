"""The reference twin's run-time layer (npu_migrate/verify/cuda_on_npu.py) in a real
process on the emulated NPU: CUDA calls answer as on a CUDA machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
