"""Held-out round 22's wrong edits, one family per test (rl_games' MuJoCo Warp environment,
D-FINE's and gritlm's GradScaler on an older torch, dolomite-engine's cute-kernels gate).
Each test fails on the engine of round 22's first pass (2343c1a)."""

from __future__ import annotations

from ._files import write

SIMULATOR = '''import os

import torch


class WarpEnv:
    def __init__(self, **kwargs):
        import warp as wp
        wp.init()
        self.device = kwargs.pop("device", "cuda")
        if self.device == "cuda" and os.getenv("LOCAL_RANK") is not None:
            self.device = f"cuda:{os.getenv('LOCAL_RANK')}"
        self.obs = torch.zeros(4, device="cuda")


if __name__ == "__main__":
    WarpEnv()
'''


def test_a_device_attribute_in_a_file_that_drives_a_simulator_is_not_proof(tmp_path, run_cli):
    """rl_games' mjlab wrapper: `self.device` goes to MuJoCo Warp, which knows no "npu"; an
    attribute's name proves nothing there (reported), while a device handed to torch itself
    is still migrated."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "env.py", SIMULATOR)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'kwargs.pop("device", "cuda")' in text and 'if self.device == "cuda"' in text
    assert 'torch.zeros(4, device="npu")' in text
    assert "which takes device strings of its own" in result.output


def test_a_simulator_section_of_a_config_keeps_its_device(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    config = "params:\n  config:\n    device: cuda:0\n    env_config:\n      device: cuda\n"
    path = write(tmp_path, "ppo.yaml", config)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == config.replace("device: cuda:0", "device: npu:0")
    assert "under `env_config:` is the environment's or simulator's device" in result.output


SCALER = "import torch\nfrom torch.cuda.amp import GradScaler\n\nscaler = torch.cuda.amp.GradScaler()\n"


def test_a_project_that_admits_an_older_torch_gets_the_scaler_every_torch_has(tmp_path, run_cli):
    """D-FINE allows torch>=2.0.1: `from torch.amp import GradScaler` is torch 2.3's, so on the
    torch 2.1 of many Ascend images the module no longer imported."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "requirements.txt", "torch>=2.0.1\n")
    path = write(tmp_path, "train.py", SCALER)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "from torch.amp import GradScaler" not in text and "torch.amp.GradScaler" not in text
    assert "torch.npu.amp.GradScaler()" in text, result.output


def test_a_project_on_a_new_torch_gets_torch_amp(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "requirements.txt", "torch>=2.4\n")
    path = write(tmp_path, "train.py", SCALER)
    run_cli("--write", "--no-cache", ".")
    assert 'torch.amp.GradScaler("npu")' in path.read_text()


def test_cute_kernels_is_a_package_of_cuda_kernels(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    source = ("import torch\n\ntry:\n    if torch.cuda.is_available():\n        import cute_kernels\n"
              "        HAVE = True\n    else:\n        HAVE = False\nexcept ImportError:\n    HAVE = False\n")
    path = write(tmp_path, "packages.py", source)
    run_cli("--write", "--no-cache", ".")
    assert path.read_text() == source


def test_a_device_handed_to_a_helper_named_for_cuda_is_not_proof(tmp_path, run_cli):
    """LatentSync's FaceDetector hands its device to `cuda_to_int`, which turns it into
    insightface's ctx_id (onnxruntime's CUDA provider) and rejects anything but cuda."""
    (tmp_path / ".git").mkdir()
    source = ('import torch\n\n\nclass FaceDetector:\n    def __init__(self, device="cuda"):\n'
              '        self.ctx_id = cuda_to_int(device)\n\n\ndef cuda_to_int(name):\n'
              '    if name == "cuda":\n        return 0\n    device = torch.device(name)\n'
              '    if device.type != "cuda":\n        raise ValueError(device.type)\n    return device.index\n\n\n'
              'if __name__ == "__main__":\n    FaceDetector()\n')
    path = write(tmp_path, "face.py", source)
    result = run_cli("--write", "--no-cache", ".")
    assert 'def __init__(self, device="cuda")' in path.read_text()
    assert "NPU108" in result.output


def test_a_megatron_core_older_than_mindspeed_blocks_its_importers(tmp_path, run_cli):
    """CoLLiE pins megatron-core==0.2.0, older than any MindSpeed branch covers: its set-up
    calls Megatron's CUDA RNG tracker, so the modules that import megatron are left and
    reported; a plain Hugging Face script beside them is migrated."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "requirements.txt", "torch\nmegatron-core==0.2.0\n")
    dist = write(tmp_path, "pkg/dist.py", "import torch\nfrom megatron.core import tensor_parallel\n\n\n"
                                          "def setup(rank):\n    torch.cuda.set_device(rank)\n"
                                          "    tensor_parallel.model_parallel_cuda_manual_seed(1)\n")
    raw = write(tmp_path, "raw.py", "import torch\n\nx = torch.ones(1).cuda()\n")
    result = run_cli("--write", "--no-cache", ".")
    assert "torch.cuda.set_device(rank)" in dist.read_text()
    assert "older than any MindSpeed branch covers" in result.output
    assert "torch.ones(1).npu()" in raw.read_text()


def test_a_megatron_core_mindspeed_covers_is_migrated(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "requirements.txt", "torch\nmegatron-core==0.12.1\n")
    dist = write(tmp_path, "pkg/dist.py", "import torch\nfrom megatron.core import tensor_parallel\n\n\n"
                                          "def setup(rank):\n    torch.cuda.set_device(rank)\n")
    run_cli("--write", "--no-cache", ".")
    assert "torch.npu.set_device(rank)" in dist.read_text()
