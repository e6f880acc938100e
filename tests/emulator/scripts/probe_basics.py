"""Exercise the emulated NPU's device API in one process; print a JSON report.

Run under ``npu-migrate emulate`` with NPU_MIGRATE_EMULATOR_DEVICES=2. Each
check records what happened (values, exception types and messages) so the
tests can assert on them without importing torch_npu into pytest.
"""

import io
import json
import os
import sys
import tempfile

autoloaded_before_import = None
import torch

autoloaded_before_import = "torch_npu" in sys.modules and hasattr(torch, "npu")
import torch_npu
from torch import nn

report = {"autoloaded": autoloaded_before_import, "torch_npu_file": torch_npu.__file__}


def outcome(fn):
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - we report every failure
        return {"ok": False, "type": type(exc).__name__, "msg": str(exc)[:500]}
    return {"ok": True, "value": value}


# tensors on npu -----------------------------------------------------------
a = torch.arange(6, dtype=torch.float32).npu()
b = torch.ones(6, device="npu:0")
report["npu_method_device"] = str(a.device)
report["factory_device"] = str(b.device)
report["is_npu"] = [a.is_npu, torch.ones(1).is_npu]
report["sum"] = (a + b).sum().item()
report["module_npu"] = str(next(nn.Linear(2, 2).npu().parameters()).device)


class Tied(nn.Module):  # a weight-tied LM head, as in GPT-style models
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.emb.weight


tied = Tied()
param = tied.emb.weight
tied.npu()
report["tied_after_npu"] = {
    "still_tied": tied.head.weight is tied.emb.weight,
    "same_parameter_object": tied.emb.weight is param,
    "device": str(param.device),
    "n_params": len(list(tied.parameters())),
}
tied.cpu()
report["tied_after_cpu"] = tied.head.weight is tied.emb.weight and str(param.device) == "cpu"
report["shallow_copy_compatible"] = torch._has_compatible_shallow_copy_type(
    torch.zeros(1), torch.zeros(1, device="npu")
)
report["mix"] = outcome(lambda: (a + torch.ones(6)).sum().item())
report["mix_matmul"] = outcome(
    lambda: nn.Linear(6, 2).npu()(torch.ones(1, 6)).sum().item()
)
report["cuda_tensor"] = outcome(lambda: str(torch.ones(2).cuda().device))
report["cuda_module"] = outcome(
    lambda: str(next(nn.Linear(2, 2).cuda().parameters()).device)
)
report["npu_to_cpu"] = a.cpu().tolist()

# device management --------------------------------------------------------
report["device_count"] = torch.npu.device_count()
report["is_available"] = torch.npu.is_available()
torch.npu.set_device(1)
report["current_after_set"] = torch.npu.current_device()
report["default_npu_after_set"] = str(torch.zeros(1, device="npu").device)
with torch.npu.device(0):
    report["inside_device_ctx"] = torch.npu.current_device()
report["after_device_ctx"] = torch.npu.current_device()
torch.npu.set_device("npu:0")
report["set_bad_device"] = outcome(lambda: torch.npu.set_device(7))
report["tensor_bad_device"] = outcome(
    lambda: str(torch.zeros(1, device="npu:7").device)
)
report["cross_device"] = outcome(
    lambda: (torch.ones(1, device="npu:0") + torch.ones(1, device="npu:1")).item()
)
torch.npu.synchronize()

# memory counters ----------------------------------------------------------
torch.npu.reset_peak_memory_stats()
before = torch.npu.memory_allocated()
big = torch.empty(1024, 1024, device="npu")
during = torch.npu.memory_allocated()
del big
after = torch.npu.memory_allocated()
report["memory"] = {
    "delta": during - before,
    "freed": during - after,
    "peak_ge": torch.npu.max_memory_allocated() - before,
    "stats_key": torch.npu.memory_stats()["allocated_bytes.all.current"] == after,
    "mem_get_info": list(torch.npu.mem_get_info()),
    "device1_untouched": torch.npu.memory_allocated(1) == 0
    or torch.npu.memory_allocated(1) < 64,
}
torch.npu.reset_peak_memory_stats()
report["memory"]["peak_after_reset"] = (
    torch.npu.max_memory_allocated() == torch.npu.memory_allocated()
)

# RNG ----------------------------------------------------------------------
torch.npu.manual_seed(123)
r1 = torch.randn(5, device="npu").cpu()
torch.npu.manual_seed(123)
r2 = torch.randn(5, device="npu").cpu()
state = torch.npu.get_rng_state()
r3 = torch.rand(3, device="npu").cpu()
torch.npu.set_rng_state(state)
r4 = torch.rand(3, device="npu").cpu()
torch.manual_seed(7)
r5 = torch.randn(4, device="npu").cpu()
torch.manual_seed(7)
r6 = torch.randn(4)
report["rng"] = {
    "seed_repeat": torch.equal(r1, r2),
    "state_roundtrip": torch.equal(r3, r4),
    "state_all_len": len(torch.npu.get_rng_state_all()),
    "npu_matches_cpu_stream": torch.equal(r5, r6),
}
torch.npu.manual_seed_all(1)
torch.npu.set_rng_state_all(torch.npu.get_rng_state_all())

# save / load --------------------------------------------------------------
model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).npu()
buf = io.BytesIO()
torch.save({"model": model.state_dict(), "t": a}, buf)
buf.seek(0)
loaded = torch.load(buf, map_location="npu:0")
buf.seek(0)
loaded_default = torch.load(buf)
buf.seek(0)
loaded_cpu = torch.load(buf, map_location="cpu")
cpu_ckpt = io.BytesIO()
torch.save(nn.Linear(4, 3).state_dict(), cpu_ckpt)
cpu_ckpt.seek(0)
from_cpu = torch.load(cpu_ckpt, map_location="npu:0")
fresh = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).npu()
fresh.load_state_dict(loaded["model"])
report["load"] = {
    "map_location_device": str(loaded["t"].device),
    "default_device": str(loaded_default["t"].device),
    "cpu_device": str(loaded_cpu["t"].device),
    "from_cpu_ckpt_device": str(from_cpu["weight"].device),
    "values_equal": torch.equal(loaded["t"].cpu(), a.cpu()),
    "state_equal": all(
        torch.equal(v.cpu(), model.state_dict()[k].cpu())
        for k, v in fresh.state_dict().items()
    ),
}
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ckpt.pt")
    torch.save(model.state_dict(), path)
    report["load"]["file_device"] = str(
        torch.load(path, map_location="npu:0")["0.weight"].device
    )


# torch.compile (eager backend) -------------------------------------------
def f(x):
    return torch.sin(x) * 2 + x.relu()


x = torch.randn(8, device="npu")
report["compile_eager"] = outcome(
    lambda: torch.equal(torch.compile(f, backend="eager")(x).cpu(), f(x).cpu())
)

# API surface --------------------------------------------------------------
report["hccl_available"] = torch.distributed.is_hccl_available()
report["unimplemented_npugraph"] = outcome(lambda: torch.npu.NPUGraph())
report["missing_nvtx"] = outcome(lambda: torch.npu.nvtx)
report["fused_kernel"] = outcome(lambda: torch_npu.npu_fusion_attention(None, None, None, 1, "BSH"))


def import_fused_kernels():
    from torch_npu import npu_fusion_attention, npu_rms_norm  # noqa: F401

    return "imported"


report["fused_kernel_import"] = outcome(import_fused_kernels)
report["fused_kernel_unknown"] = outcome(lambda: torch_npu.npu_no_such_kernel)
report["npu_random"] = outcome(lambda: [torch.npu.random.get_rng_state_all()[0].equal(torch.get_rng_state()), torch.npu.random.set_rng_state(torch.npu.random.get_rng_state()), torch.npu.random.manual_seed_all(3), torch.npu.random.initial_seed()])
report["record_stream"] = outcome(lambda: torch.ones(2, device="npu").record_stream(torch.npu.current_stream()))
torch.npu.matmul.allow_hf32 = True
torch.npu.conv.allow_hf32 = False
report["hf32"] = [torch.npu.matmul.allow_hf32, torch.npu.conv.allow_hf32]
report["hf32_type_check"] = outcome(lambda: setattr(torch.npu.matmul, "allow_hf32", 1))
s = torch.npu.Stream()
with torch.npu.stream(s):
    torch.ones(1, device="npu")
e1, e2 = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
e1.record()
e2.record()
report["events"] = [e1.query(), e1.elapsed_time(e2) >= 0]
report["current_stream_device"] = str(torch.npu.current_stream().device)
report["device_name"] = torch.npu.get_device_name(0)
report["capability"] = torch.npu.get_device_capability()
report["bf16"] = torch.npu.is_bf16_supported()
report["amp_dtypes"] = [str(t) for t in torch.npu.get_amp_supported_dtype()]
emitted = [
    "synchronize",
    "set_device",
    "device_count",
    "current_device",
    "is_available",
    "empty_cache",
    "manual_seed",
    "manual_seed_all",
    "memory_allocated",
    "max_memory_allocated",
    "reset_peak_memory_stats",
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "Stream",
    "Event",
    "current_stream",
    "get_device_name",
    "get_device_properties",
    "mem_get_info",
    "is_bf16_supported",
    "utilization",
    "memory_reserved",
    "max_memory_reserved",
    "memory_stats",
    "seed",
    "initial_seed",
    "default_stream",
    "stream",
    "device",
    "get_device_capability",
    "set_compile_mode",
    "config",
    "matmul",
    "conv",
]
report["emitted_missing"] = [
    n
    for n in emitted
    if not hasattr(torch.npu, n)
    or getattr(getattr(torch.npu, n), "__npu_migrate_unimplemented__", False)
]
report["amp_missing"] = [
    n
    for n in ("autocast", "GradScaler", "custom_fwd", "custom_bwd")
    if not hasattr(torch.npu.amp, n)
]
report["npu_all"] = list(torch.npu.__all__)
report["implemented"] = sorted(
    n
    for n in torch.npu.__all__
    if not getattr(getattr(torch.npu, n), "__npu_migrate_unimplemented__", False)
)
report["fallback_calls_positive"] = torch_npu._emulator.fallback_calls() > 0


def exposed(mod, prefix):
    """Public names a module exposes itself (not modules, not helpers it imported)."""
    out = []
    for name in dir(mod):
        if name.startswith("_"):
            continue
        obj = getattr(mod, name)
        if isinstance(obj, type(json)):
            if obj.__name__.startswith(prefix):
                out.append(name)
            continue
        owner = getattr(obj, "__module__", None) or type(obj).__module__
        if name in getattr(mod, "__all__", ()) or str(owner).startswith(prefix):
            out.append(name)
    return sorted(out)


report["exposed"] = {
    "torch.npu": exposed(torch.npu, "torch_npu"),
    "torch.npu.amp": exposed(torch.npu.amp, "torch_npu"),
    "torch_npu": exposed(torch_npu, "torch_npu"),
    "torch.npu.matmul": ["allow_hf32"],
    "torch.npu.conv": ["allow_hf32"],
    "torch.npu.config": ["allow_internal_format"],
}
report["table_only_name"] = outcome(lambda: torch.npu.graphs)
print(json.dumps(report))
