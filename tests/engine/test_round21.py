"""Held-out round 21's wrong edits, one family per test (finetrainers' timer and device
detection, fish-speech's compile backend and int4 packing, MedicalGPT's inference demo).
Each test fails on the engine of round 21's first pass (4d99282)."""

from __future__ import annotations

from ._files import write

DETECT = '''import torch
from torch._utils import _get_available_device_type, _get_device_module


def get_device_info():
    device_type = _get_available_device_type()
    if device_type is None:
        device_type = "cuda"
    return device_type, _get_device_module(device_type)


if __name__ == "__main__":
    print(get_device_info(), torch.cuda.device_count())
'''


def test_the_fallback_after_a_failed_detection_stays(tmp_path, run_cli):
    """`if device_type is None: device_type = "cuda"` after a detection call runs only where
    no accelerator was found (a CPU machine): renaming it broke the CPU path."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "detect.py", DETECT)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'device_type = "cuda"' in text and "torch.npu.device_count()" in text
    assert "a fallback taken when no accelerator was found" in result.output


TIMER = '''import time

import torch


class Timer:
    def __init__(self, device):
        self.device = device
        self.active = False

    def start(self):
        self.active = True
        if self.device == "cuda" and torch.cuda.is_available():
            self._start_cuda()
        else:
            self.t0 = time.time()

    def elapsed(self):
        if self.device == "cuda" and torch.cuda.is_available():
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            return self.start_event.elapsed_time(end)
        return time.time() - self.t0

    def _start_cuda(self):
        self.start_event = torch.cuda.Event(enable_timing=True)
        self.start_event.record()


def sync():
    torch.cuda.synchronize()


if __name__ == "__main__":
    Timer("cuda").start()
    sync()
'''


def test_the_same_condition_as_a_kept_gate_is_kept_in_the_whole_class(tmp_path, run_cli):
    """finetrainers' Timer: the gate in front of `_start_cuda` is kept, so the same whole
    condition in `elapsed` is too, with the code it opens and the CUDA method itself."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "timer.py", TIMER)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert text.count('if self.device == "cuda" and torch.cuda.is_available():') == 2, result.output
    assert "end = torch.cuda.Event(enable_timing=True)" in text
    assert "self.start_event = torch.cuda.Event(enable_timing=True)" in text
    assert "torch.npu.synchronize()" in text
    assert "is kept as a CUDA test elsewhere in the same class" in result.output


COMPILE = '''import torch


def load(model, compile):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    if compile:
        model = torch.compile(
            model,
            backend="inductor" if torch.cuda.is_available() else "aot_eager",
            mode="default" if torch.cuda.is_available() else None,
        )
    return model


if __name__ == "__main__":
    load(torch.nn.Linear(2, 2), True)
'''


def test_a_cuda_test_that_picks_inductor_stays(tmp_path, run_cli):
    """fish-speech: `backend="inductor" if torch.cuda.is_available() else "aot_eager"` took
    inductor on the NPU, which needs triton-ascend; the test stays, and the other tests of
    `torch.cuda.is_available()` in the function are migrated (a bare query is asked for
    many reasons)."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "infer.py", COMPILE)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'backend="inductor" if torch.cuda.is_available() else "aot_eager"' in text
    assert "    if torch.npu.is_available():\n        torch.npu.synchronize()" in text
    assert "guards `inductor`" in result.output


KERNEL_TEST = '''import unittest

import torch

from pkg.attention import flash_attn_flash_attention, native_cudnn_attention


class RingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.device = "cuda"

    @unittest.skipIf(not torch.cuda.is_available(), "CUDA is not available")
    def test_flash(self):
        q = torch.randn(2, 4, device=self.device)
        flash_attn_flash_attention(q, q, q)
'''


def test_a_test_module_that_imports_kernels_by_name_is_left(tmp_path, run_cli):
    """finetrainers' attention tests import the project's `flash_attn_flash_attention` and
    `native_cudnn_attention` and run them: their device and skip tests stay CUDA's (on the NPU
    the tests are skipped, not fed NPU tensors)."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/attention.py", "def flash_attn_flash_attention(q, k, v):\n    return q\n\n\n"
                                        "def native_cudnn_attention(q, k, v):\n    return q\n")
    path = write(tmp_path, "tests/test_attention.py", KERNEL_TEST)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == KERNEL_TEST
    assert "a test module of CUDA/Triton kernels" in result.output
