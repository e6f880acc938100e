"""npu_runtime.parallel: what nn.DataParallel becomes (NPU510) and single-device models
made data parallel (NPU511): one process without a group, two gloo processes with DDP."""

import base64
import json
import logging
import subprocess
import sys
from collections import namedtuple

import npu_runtime
import numpy as np
import pytest
import torch
import torch.distributed as dist
from npu_runtime._parallel_modules import (
    SingleProcessDataParallel,
    strip_prefix,
    to_device,
)
from torch import nn
from torch.utils.data import DataLoader, RandomSampler
from torch.utils.data.distributed import DistributedSampler

from . import parallel_worker
from ._helpers import HERE, child_env, free_port

WORKER = str(HERE / "parallel_worker.py")


def test_importing_the_runtime_does_not_import_torch():
    code = "import sys, npu_runtime, npu_runtime.parallel; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=child_env(), cwd="/", check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("environ", [
    {},
    {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
])
def test_a_single_process_gets_no_group(environ):
    assert npu_runtime.init_data_parallel(environ=environ) is None
    assert not dist.is_initialized()


def test_a_node_launcher_without_the_slot_runs_as_one_process(caplog):
    environ = {"MA_NUM_HOSTS": "1", "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "8"}
    with caplog.at_level(logging.WARNING, logger="npu_runtime"):
        assert npu_runtime.init_data_parallel(environ=environ) is None
    assert "not which device" in caplog.text
    assert not dist.is_initialized()


def test_malformed_launch_variables_are_a_launch_error():
    with pytest.raises(npu_runtime.LaunchError, match="RANK"):
        npu_runtime.init_data_parallel(environ={"RANK": "x", "WORLD_SIZE": "2"})


def test_single_process_wrapper_keeps_module_keys_and_isinstance():
    torch.manual_seed(0)
    original = nn.DataParallel(nn.Linear(3, 2))  # what the CUDA original saves (CPU: a pass-through)
    checkpoint = original.state_dict()
    model = npu_runtime.data_parallel(nn.Linear(3, 2), device_ids=[0, 1], output_device=0, dim=1)
    assert isinstance(model, SingleProcessDataParallel) and isinstance(model, nn.DataParallel)
    assert list(model.state_dict()) == list(checkpoint) == ["module.weight", "module.bias"]
    model.load_state_dict(checkpoint)  # the CUDA original's checkpoint loads unchanged
    x = torch.randn(4, 3)
    assert torch.equal(model(x), original(x))
    assert torch.equal(model.module(x), original.module(x))
    original.load_state_dict(model.state_dict())  # and the other way round


def test_submodule_wrapper_is_single_process_too():
    model = npu_runtime.data_parallel(nn.Linear(3, 2), ddp=False)
    assert isinstance(model, SingleProcessDataParallel)


def test_distribute_model_leaves_a_single_process_model_alone():
    model = nn.Linear(3, 2)
    assert npu_runtime.distribute_model(model) is model


def test_inputs_are_moved_through_nested_containers():
    Pair = namedtuple("Pair", "a b")
    meta = torch.device("meta")
    moved = to_device(((torch.ones(2), [torch.zeros(1), 3]), {"k": Pair(torch.ones(1), "s")}), meta)
    (first, (second, three)), mapping = moved
    assert first.device == meta and second.device == meta and three == 3
    assert isinstance(mapping["k"], Pair) and mapping["k"].a.device == meta and mapping["k"].b == "s"


def test_strip_prefix_only_when_every_key_has_it_and_the_model_does_not():
    flat = nn.Linear(2, 2)
    prefixed = {"module.weight": torch.zeros(2, 2), "module.bias": torch.zeros(2)}
    assert list(strip_prefix(prefixed, flat)) == ["weight", "bias"]
    assert list(prefixed) == ["module.weight", "module.bias"]  # the caller's dict is not changed
    mixed = {"module.weight": torch.zeros(2, 2), "bias": torch.zeros(2)}
    assert strip_prefix(mixed, flat) is mixed
    holder = nn.Module()
    holder.module = nn.Linear(2, 2)  # a model whose own keys start with module.
    assert strip_prefix(prefixed, holder) is prefixed


def _sampler(dataset, replicas, rank=0):
    return DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=True)


def test_per_process_batch_keeps_the_global_batch(caplog):
    dataset = list(range(100))
    assert npu_runtime.per_process_batch_size(64, None) == 64
    assert npu_runtime.per_process_batch_size(64, RandomSampler(dataset)) == 64
    assert npu_runtime.per_process_batch_size(64, _sampler(dataset, 1)) == 64
    assert npu_runtime.per_process_batch_size(64, _sampler(dataset, 2)) == 32
    assert npu_runtime.per_process_batch_size(64, _sampler(dataset, 8, 3)) == 8
    with caplog.at_level(logging.WARNING, logger="npu_runtime"):
        assert npu_runtime.per_process_batch_size(65, _sampler(dataset, 2)) == 33
        assert npu_runtime.per_process_batch_size(1, _sampler(dataset, 4)) == 1
    assert "global batch of 66" in caplog.text and "global batch of 4" in caplog.text


def _reports(stdout: str) -> list[dict]:
    found = [json.loads(line[len("REPORT "):]) for line in stdout.splitlines() if line.startswith("REPORT ")]
    return sorted(found, key=lambda r: r["rank"])


def _floats(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=np.float32)


def _one_process_global_batch() -> tuple[np.ndarray, np.ndarray]:
    """The worker's training in one process with the global batch, in the order the
    two-process job reads the data (DistributedSampler's permutation, unsplit)."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    dataset = parallel_worker.data()
    sampler = _sampler(dataset, 1)
    parallel_worker.train(model, DataLoader(dataset, batch_size=parallel_worker.GLOBAL_BATCH, sampler=sampler), sampler)
    return model.weight.detach().numpy().ravel(), model.bias.detach().numpy()


def test_plain_process_uses_the_thin_wrapper():
    proc = subprocess.run([sys.executable, WORKER], env=child_env(), capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    (report,) = _reports(proc.stdout)
    assert report["type"] == "SingleProcessDataParallel" and report["is_data_parallel"]
    assert report["keys"] == ["module.bias", "module.weight"]
    assert report["plain_type"] == "Sequential" and report["plain_keys"] == ["0.bias", "0.weight"]
    assert report["batch"] == parallel_worker.GLOBAL_BATCH


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_the_global_batch():
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), WORKER],
                          env=child_env(), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = _reports(proc.stdout)
    assert [r["rank"] for r in reports] == [0, 1] and all(r["world_size"] == 2 for r in reports)
    for r in reports:
        assert r["type"] == "DistributedDataParallel" and r["keys"] == ["module.bias", "module.weight"]
        assert r["plain_type"] == "TransparentDDP" and r["plain_keys"] == ["0.bias", "0.weight"]
        assert r["plain_zeroed"] and r["plain_attr"] == ["kept", 1, 2, 1]
        assert r["batch"] == parallel_worker.GLOBAL_BATCH // 2
    assert reports[0]["weight"] == reports[1]["weight"] and reports[0]["bias"] == reports[1]["bias"]
    weight, bias = _one_process_global_batch()
    # DDP averages the two half-batch gradients: only the summation order differs.
    np.testing.assert_allclose(_floats(reports[0]["weight"]), weight, rtol=0, atol=1e-6)
    np.testing.assert_allclose(_floats(reports[0]["bias"]), bias, rtol=0, atol=1e-6)


FROZEN = """
import sys

import torch
import npu_runtime

model = torch.nn.Linear(2, 2)
for p in model.parameters():
    p.requires_grad_(False)
wrapped = npu_runtime.data_parallel(model)
# one write a line: two ranks share the pipe, and print() writes the text and its end apart
sys.stdout.write(f"REPORT {type(wrapped).__name__} {wrapped.module is model} "
                 f"{isinstance(wrapped, torch.nn.DataParallel)}\\n")
sys.stdout.flush()
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_frozen_model_in_two_processes_gets_the_thin_wrapper(tmp_path):
    """Held-out round 21 (MedicalGPT's multi-GPU inference demo): DDP raises for a module
    with no trainable parameter; inference needs no synchronisation."""
    script = tmp_path / "frozen.py"
    script.write_text(FROZEN)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(script)],
                          env=child_env(), capture_output=True, text=True, timeout=200, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT")]
    assert lines == ["REPORT SingleProcessDataParallel True True"] * 2

