"""Focused tests for the backend-flag rules (NPU6xx) beyond the golden fixtures."""

from __future__ import annotations

import pytest
from npu_migrate.rules.backend_flags.npu601_tf32_to_hf32 import TARGETS

from npu_migrate.pipeline.npu_api import load_api

from ._run import run


def test_hf32_targets_exist_in_the_wheel():
    api = load_api()
    for target in TARGETS.values():
        assert api.has(f"torch.{target}"), target


@pytest.mark.parametrize(
    "source,line",
    [
        ("import torch\nflag = torch.backends.cuda.matmul.allow_tf32\n",
         'flag = torch.npu.matmul.allow_hf32 if hasattr(torch.npu, "matmul") else torch.backends.cuda.matmul.allow_tf32'),
        ("import torch as th\nth.backends.cudnn.allow_tf32 = False\n", "th.npu.conv.allow_hf32 = False"),
        ("import torch.backends.cudnn as cd\nif cd.allow_tf32:\n    pass\n",
         'if (torch.npu.conv.allow_hf32 if hasattr(torch.npu, "conv") else cd.allow_tf32):'),
    ],
)
def test_tf32_reads_and_writes(source, line):
    out, _ = run(source, "NPU601")
    assert line in out


def test_torch_bound_to_something_else_is_reported():
    source = "from torch.backends import cudnn\nimport numpy as torch\ncudnn.allow_tf32 = True\n"
    out, findings = run(source, "NPU601")
    assert out == source and [f.line for f in findings] == [3]


@pytest.mark.parametrize(
    "source,reported",
    [
        ('import os\nos.system("nvidia-smi")\n', True),
        ('import subprocess\nsubprocess.run(["bash", "-c", "sleep 1; nvidia-smi -L"])\n', True),
        ('print("check the nvidia-smi output")\n', False),
        ('import logging\nlogging.info("run nvidia-smi to check")\n', False),
    ],
)
def test_nvidia_smi_commands_vs_prose(source, reported):
    _, findings = run(source, "NPU604")
    assert bool(findings) == reported
