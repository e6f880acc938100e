"""The wrong edits rounds 21 and 22 left on their final engine, one family per test (session
14): a value renamed while a kept CUDA test still compares it, a device held in an
attribute whose name says nothing, tensors loaded as data, launchers tuned for one NVIDIA
cluster. Each test fails on 3b00a1c."""

from __future__ import annotations

from ._files import write

KEPT_FALLBACK = '''import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("CUDA not available, using CPU (Triton won't work)")
        device = "cpu"
    x = torch.ones(2, device=device)
    print(x)


if __name__ == "__main__":
    main()
'''


def test_an_option_default_is_left_where_a_kept_cuda_test_compares_it(tmp_path, run_cli):
    """rl_games' Triton benchmark: the test in front of Triton stays CUDA's (NPU011), so a
    default renamed to "npu" alone would skip its CPU fallback: the default is reported."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "bench.py", KEPT_FALLBACK)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'default="cuda"' in text
    assert 'if device == "cuda" and not torch.cuda.is_available()' in text
    assert "a CUDA test kept in front of CUDA-only code (NPU011)" in result.output


def test_an_option_default_compared_by_an_ordinary_test_is_still_migrated(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    source = KEPT_FALLBACK.replace("        print(\"CUDA not available, using CPU (Triton won't work)\")\n", "")
    path = write(tmp_path, "train.py", source)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'default="npu"' in text and 'if device == "npu" and not torch.npu.is_available()' in text


ATTRIBUTE = '''import os

import torch.distributed as dist


class Agent:
    def __init__(self, config):
        self.local_rank = int(os.getenv("LOCAL_RANK", "0"))
        dist.init_process_group("nccl")
        self.device_name = "cuda:" + str(self.local_rank)
        config["device"] = self.device_name
        self.label = "cuda:" + str(self.local_rank)
        print(self.label)
'''


def test_a_device_held_in_an_attribute_named_otherwise_follows_its_reads(tmp_path, run_cli):
    """rl_games: `self.device_name = 'cuda:' + str(rank)` goes on to `config['device']`;
    left CUDA's beside an HCCL process group, the agent mixed both. Another attribute that
    only reaches print() stays as written."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "agent.py", ATTRIBUTE)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'self.device_name = "npu:" + str(self.local_rank)' in text
    assert 'dist.init_process_group("hccl")' in text
    assert 'self.label = "cuda:" + str(self.local_rank)' in text


LOADED = '''import torch

stats = torch.load("stats.pt")
tokens = torch.load("tokens.pt")
ckpt = torch.load("ckpt.pt")
emb = torch.load("emb.pt")


def run(model, batch, i):
    model.load_state_dict(ckpt["model"])
    x = (batch - stats) / 2
    print(emb.size(1), emb.cpu().numpy())
    return model.decode(tokens[i]), x
'''


def test_tensors_loaded_as_data_are_reported_not_mapped_to_the_cpu(tmp_path, run_cli):
    """ml-4m's notebook: precomputed tokens indexed and decoded next to a model on the
    device; "cpu" mixed devices. A checkpoint read by keys, and tensors the code moves,
    still get map_location="cpu"."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "infer.py", LOADED)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'stats = torch.load("stats.pt")\n' in text
    assert 'tokens = torch.load("tokens.pt")\n' in text
    assert 'ckpt = torch.load("ckpt.pt", map_location="cpu")' in text
    assert 'emb = torch.load("emb.pt", map_location="cpu")' in text
    assert result.output.count("which the code uses as tensors where they are loaded") == 2


CLUSTER = '''#!/bin/bash
export NCCL_IB_HCA="^=mlx5_1,mlx5_6"
export NCCL_NVLS_ENABLE=1
export NCCL_NET_GDR_C2C=1
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
GPUS_PER_NODE=$(echo $CUDA_VISIBLE_DEVICES | tr ',' '\\n' | wc -w)
torchrun --nproc_per_node=$GPUS_PER_NODE train.py
'''


def test_a_launcher_tuned_for_one_nvidia_cluster_is_left_and_reported(tmp_path, run_cli):
    """dolomite-engine's Blue Vela and CoreWeave jobs: renaming their CUDA_VISIBLE_DEVICES and
    TORCH_NCCL_* settings broke them on their own cluster and made no Ascend launcher."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n")
    path = write(tmp_path, "job.sh", CLUSTER)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == CLUSTER
    assert "this launcher is tuned for one NVIDIA cluster" in result.output


def test_a_launcher_with_two_fabric_settings_is_migrated(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n")
    source = CLUSTER.replace("export NCCL_NET_GDR_C2C=1\n", "")
    path = write(tmp_path, "job.sh", source)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "ASCEND_RT_VISIBLE_DEVICES" in text and "TORCH_HCCL_ASYNC_ERROR_HANDLING" in text


INT4 = '''import torch


def pack(weight, tiles):
    return torch.ops.aten._convert_weight_to_int4pack(weight, tiles)


def quantize(model):
    for name, weight in model.state_dict().items():
        packed = pack(weight.to(torch.bfloat16).to("cuda"), 8)
        print(name, packed.to("cpu"))
    return model.to("cuda")
'''


def test_a_tensor_moved_for_a_cuda_only_kernel_keeps_its_device(tmp_path, run_cli):
    """fish-speech's int4 quantizer (gpt-fast's): the weight goes to "cuda" for tinygemm's
    int4 packing, which torch_npu does not register; "npu" sent NPU tensors into it. The
    model moved for torch is still migrated."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "quantize.py", INT4)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'weight.to(torch.bfloat16).to("cuda")' in text
    assert 'return model.to("npu")' in text
    assert "the device a tensor is moved to for `pack`" in result.output


SKIP_HELPER = '''import torch
from unittest import TestCase


class Commons(TestCase):
    def skip_if_unavailable(self, device):
        if isinstance(device, torch.device):
            device = device.type
        if device == "cuda" and not torch.cuda.is_available():
            self.skipTest("CUDA is unavailable")

    def pick(self, device):
        if device == "cuda":
            return torch.device("cuda")
        return torch.device("cpu")
'''


def test_a_test_helper_that_skips_for_its_callers_keeps_its_cuda_clause_and_gains_the_npus(tmp_path, run_cli):
    """dolomite-engine's test_common: renamed, the helper stopped skipping the suite's
    CUDA-only tests (kept CUDA's) on Ascend; left, it would stop skipping the NPU tests on a
    CPU machine. It keeps the CUDA clause and gains the NPU one; a second run changes
    nothing. A helper that only picks a device is migrated as before."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "tests/common.py", SKIP_HELPER)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert ('if (device == "cuda" and not torch.cuda.is_available()) or '
            '(device == "npu" and not torch.npu.is_available()):') in text
    assert 'if device == "npu":\n            return torch.device("npu")' in text
    run_cli("--write", "--no-cache", ".")
    assert path.read_text() == text


def test_an_option_default_compared_in_front_of_data_parallel_npu510_rewrites_is_migrated(tmp_path, run_cli):
    """`if device == 'cuda': net = nn.DataParallel(net)`: NPU510 makes that DataParallel the
    runtime's, so the test is an ordinary device test and the default moves with it."""
    (tmp_path / ".git").mkdir()
    source = ("import argparse\n\nimport torch\nimport torch.nn as nn\n\n"
              "parser = argparse.ArgumentParser()\nparser.add_argument('--device', default='cuda')\n"
              "args = parser.parse_args()\ndevice = args.device\nnet = nn.Linear(2, 2).to(device)\n"
              "if device == 'cuda':\n    net = torch.nn.DataParallel(net)\n")
    path = write(tmp_path, "train.py", source)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "default='npu'" in text and "if device == 'npu':" in text
