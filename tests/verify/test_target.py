"""The CPU target: the same rules write the CPU spelling (verify's reference twin)."""

from __future__ import annotations

from npu_migrate.pipeline.registry import all_rules
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.target import CPU, NPU, named, rule_ids_for
from npu_migrate.python.engine import migrate_source

SOURCE = b'''import os
import torch
import torch.distributed as dist
from torch.cuda.amp import GradScaler, autocast

dist.init_process_group(backend="nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(2, 2).cuda()
x = torch.zeros(2).to(local_rank)
scaler = GradScaler()
with autocast(dtype=torch.float16):
    y = model(x.to("cuda"))
'''


def _migrate(source: bytes, target: str) -> str:
    ids = rule_ids_for(target) if target == "cpu" else None
    settings = Settings(selection=Selection.create(select=ids), target=target)
    result = migrate_source("train.py", source, settings)
    assert result.error is None
    return (result.new_source or source).decode()


def test_cpu_target_writes_the_cpu_spelling():
    out = _migrate(SOURCE, "cpu")
    assert 'backend="gloo"' in out
    assert 'torch.device(f"cpu:{local_rank}" if torch.cuda.is_available() else "cpu")' in out
    assert 'x.to("cpu")' in out
    assert '.to(f"cpu:{local_rank}")' in out
    assert 'GradScaler("cpu")' in out
    assert 'autocast("cpu", dtype=torch.float16)' in out
    assert "from torch.amp import GradScaler, autocast" in out
    # what only the NPU target rewrites stays CUDA code, answered by verify's CUDA-on-CPU layer
    assert "torch_npu" not in out and "npu" not in out
    assert "torch.cuda.set_device(local_rank)" in out and ".cuda()" in out


def test_npu_target_is_unchanged_by_the_parameter():
    out = _migrate(SOURCE, "npu")
    assert 'backend="hccl"' in out and 'f"npu:{local_rank}"' in out and 'GradScaler("npu")' in out
    assert "import torch_npu" in out and ".npu()" in out and "torch.npu.set_device" in out


def test_cpu_target_is_idempotent():
    once = _migrate(SOURCE, "cpu")
    assert _migrate(once.encode(), "cpu") == once


def test_unrelated_code_is_untouched_for_the_cpu_target():
    source = b"import torch\nprint('cuda')\nx = torch.zeros(2)\n"
    assert _migrate(source, "cpu") == source.decode()


def test_target_is_part_of_the_cache_key():
    assert Settings(target="cpu").key() != Settings().key()
    assert Settings().key() == Settings(target="npu").key()


def test_cpu_rules_are_declared_and_know_the_npu_too():
    ids = rule_ids_for("cpu")
    assert {"NPU104", "NPU105", "NPU201", "NPU301", "NPU302", "NPU401", "NPU501", "NPU502"} <= set(ids)
    assert "NPU100" not in ids and "NPU101" not in ids and "NPU103" not in ids and "NPU701" not in ids
    rules = all_rules()
    assert all("npu" in rules[rid].targets for rid in ids)


def test_backend_strings():
    assert NPU.backend_string("nccl") == "hccl" and CPU.backend_string("NCCL") == "gloo"
    assert NPU.backend_string("cpu:gloo,cuda:nccl") == "cpu:gloo,npu:hccl"
    assert CPU.backend_string("cpu:gloo,cuda:nccl") == "gloo"
    assert CPU.backend_string("gloo") is None
    assert named("cpu") is CPU and CPU.device_string("cuda:1") == "cpu:1"


def test_config_rules_write_the_cpu_spelling():
    from npu_migrate.configs.engine import migrate

    data = b"dist:\n  backend: nccl  # comm\ndevice: 'cuda:1'\nnote: cuda\n"
    for target, device, backend in (("cpu", "cpu:1", "gloo"), ("npu", "npu:1", "hccl")):
        ids = rule_ids_for(target) if target == "cpu" else None
        result = migrate("config.yaml", data, Settings(selection=Selection.create(select=ids), target=target))
        assert result.new_source == f"dist:\n  backend: {backend}  # comm\ndevice: '{device}'\nnote: cuda\n".encode()
    assert {"NPU830", "NPU831"} <= set(rule_ids_for("cpu"))
