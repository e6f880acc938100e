"""Held-out round 26's wrong edits, one family per test: CUDA and NCCL variables renamed in
files that run on NVIDIA's platform (awsome-distributed-training's pods that request
`nvidia.com/gpu`, its Dockerfiles built on NGC and DLC images, its Slurm jobs that preload
`libnccl.so`). Each positive test fails on the engine of the round's first pass; the
others are negative controls."""

from __future__ import annotations

import re

import pytest

from ._files import write

TRAIN = "import torch\n\ntorch.ones(1).cuda()\n"

PINNED = {
    "pod.yaml": """apiVersion: v1
kind: Pod
spec:
  containers:
  - name: trainer
    image: public.ecr.aws/hpc-cloud/nccl-tests:latest
    env:
    - name: NCCL_SOCKET_IFNAME
      value: ^lo,docker0
    resources:
      limits:
        nvidia.com/gpu: 8
""",
    "Dockerfile": """FROM nvcr.io/nvidia/pytorch:24.07-py3
ENV OPAL_PREFIX=/opt/amazon/openmpi \\
    NCCL_SOCKET_IFNAME=^docker,lo,veth
""",
    "dlc.Dockerfile": """FROM 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2
ENV NCCL_SOCKET_IFNAME=^docker0
""",
    "train.sbatch": """#!/bin/bash
#SBATCH --nodes=2
export LD_PRELOAD=/usr/local/lib/libnccl.so.2
export CUDA_VISIBLE_DEVICES=0
export NCCL_ASYNC_ERROR_HANDLING=1
srun torchrun train.py
""",
    "profile.sbatch": """#!/bin/bash
srun bash -c "CUDA_VISIBLE_DEVICES=0,1 nsys profile -t nvtx,cuda -o prof python train.py"
""",
}


def test_variables_of_a_file_that_runs_on_nvidias_platform_are_left(tmp_path, run_cli):
    """Renamed, each variable dropped its setting on the NVIDIA machines the file still runs
    on and gave Ascend nothing: 123 wrong hunks of awsome-distributed-training (round 26)."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", TRAIN)
    paths = {name: write(tmp_path, name, text) for name, text in PINNED.items()}
    result = run_cli("--write", "--no-cache", ".")
    assert {name: path.read_text() for name, path in paths.items()} == PINNED
    for where, sign in (("pod.yaml:8:", "a Kubernetes NVIDIA GPU resource (`nvidia.com/gpu`), line 12"),
                        ("Dockerfile:3:", "an NVIDIA/CUDA container image (`nvcr.io/nvidia/pytorch:24.07-py3`), line 1"),
                        ("dlc.Dockerfile:2:", "an NVIDIA/CUDA container image"),
                        ("train.sbatch:4:", "a preloaded NCCL library (`LD_PRELOAD=/usr/local/lib/libnccl`), line 3"),
                        ("train.sbatch:5:", "a preloaded NCCL library"),
                        ("profile.sbatch:2:", "NVIDIA's Nsight profiler (`nsys profile`), line 2")):
        assert any(line.startswith(where) and sign in line for line in result.output.splitlines()), (where, result.output)
    again = run_cli("--write", "--no-cache", ".")
    assert _findings(again.output) == _findings(result.output)


def _findings(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"\S+:\d+:\d+: NPU\d+ ", line)]


@pytest.mark.parametrize("name,text,renamed", [
    ("pod.yaml", "spec:\n  containers:\n  - env:\n    - name: NCCL_SOCKET_IFNAME\n      value: ^lo\n"
                 "    resources:\n      limits:\n        huawei.com/Ascend910: 8\n", "HCCL_SOCKET_IFNAME"),
    ("Dockerfile", "FROM python:3.11\nENV NCCL_SOCKET_IFNAME=^docker0\n", "HCCL_SOCKET_IFNAME"),
    ("run.sh", "#!/bin/bash\n# see https://docs.nvidia.com for NCCL\nexport CUDA_VISIBLE_DEVICES=0\ntorchrun train.py\n",
     "ASCEND_RT_VISIBLE_DEVICES"),
])
def test_variables_of_a_file_with_no_nvidia_platform_are_still_renamed(tmp_path, run_cli, name, text, renamed):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", TRAIN)
    path = write(tmp_path, name, text)
    run_cli("--write", "--no-cache", ".")
    assert renamed in path.read_text()
