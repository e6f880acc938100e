"""Views, legacy typed constructors and strict mode inside torch's own code; JSON report.

Run under ``npu-migrate emulate`` (with ``--strict`` for the strict part).
"""

import json
import sys

import numpy as np
import torch
import torch_npu  # noqa: F401
from torch import nn


def outcome(fn):
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "type": type(exc).__name__, "msg": str(exc)[:300]}
    return {"ok": True, "value": value}


def views():
    base = torch.arange(10.0, device="npu")
    win = base.unfold(0, 3, 2)
    win[1, 0] = 100.0  # element 2 of base
    win.mul_(1)  # in place through the view
    pairs = torch.arange(6.0, device="npu").reshape(3, 2)
    as_complex = torch.view_as_complex(pairs)
    as_complex.mul_(2)
    cplx = torch.zeros(2, dtype=torch.complex64, device="npu")
    as_real = torch.view_as_real(cplx)
    as_real[:, 1] = 7.0
    # autograd through unfold, against CPU
    x_cpu = torch.randn(2, 3, 12, generator=torch.Generator().manual_seed(0))
    grads = []
    for dev in ("cpu", "npu"):
        x = x_cpu.to(dev).detach().requires_grad_()
        (x.unfold(2, 4, 3) ** 2).sum().backward()
        grads.append(x.grad.cpu())
    return {
        "unfold_is_view": win._base is base,
        "unfold_shape": list(win.shape),
        "unfold_write_seen": base.cpu().tolist(),
        "view_as_complex_write_seen": pairs.cpu().tolist(),
        "view_as_complex_is_view": as_complex._is_view(),
        "view_as_real_write_seen": cplx.imag.cpu().tolist(),
        "unfold_grad_equal_cpu": torch.equal(grads[0], grads[1]),
    }


def legacy():
    T, L, H = torch.npu.FloatTensor, torch.npu.LongTensor, torch.npu.HalfTensor
    rng = np.random.default_rng(0)
    ones = T(4, 1).fill_(1.0)
    noise = T(rng.normal(0, 1, (2, 3)))
    labels = L(rng.integers(0, 10, 5))
    imgs = torch.rand(2, 2, dtype=torch.float64).type(T)
    return {
        "ones": [str(ones.device), str(ones.dtype), list(ones.shape), ones.sum().item()],
        "noise": [str(noise.device), str(noise.dtype)],
        "labels": [str(labels.device), str(labels.dtype)],
        "type_to": [str(imgs.device), imgs.type()],
        "half_data": H([1, 2]).cpu().tolist(),
        "size_arg": list(T(torch.Size([2, 3])).shape),
        "isinstance": [isinstance(ones, T), isinstance(ones, L), isinstance(ones.cpu(), T)],
        "same_type_alias": T(ones) is ones,
        "names": [
            getattr(torch.npu, n).__name__
            for n in ("BoolTensor", "ByteTensor", "CharTensor", "ShortTensor", "IntTensor",
                      "LongTensor", "HalfTensor", "BFloat16Tensor", "FloatTensor", "DoubleTensor")
        ],
        "dtypes": [str(getattr(torch.npu, n).dtype) for n in ("IntTensor", "BFloat16Tensor")],
        "wrong_type": outcome(lambda: T(labels)),
    }


def strict_scaler():
    torch.manual_seed(0)
    model = nn.Linear(4, 2).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("npu")
    steps = []
    for _ in range(2):
        with torch.autocast("npu", dtype=torch.float16):
            loss = model(torch.randn(8, 4, device="npu")).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)  # explicit, as before gradient clipping
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        steps.append(loss.item())
    legacy_scaler = torch.npu.amp.GradScaler()
    legacy_scaler.scale(model(torch.randn(2, 4, device="npu")).sum()).backward()
    legacy_scaler.step(opt)

    class MyScaler(torch.amp.GradScaler):  # a library's subclass that overrides unscale_
        def unscale_(self, optimizer):
            return super().unscale_(optimizer)

    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    mine = MyScaler("npu")
    mine.scale(model(torch.randn(2, 4, device="npu")).sum()).backward()
    mine.unscale_(opt)
    return {
        "steps": outcome(lambda: steps),
        "user_float64_after": outcome(
            lambda: str(torch.zeros(2, dtype=torch.float64, device="npu").dtype)
        ),
        "user_double_cast_after": outcome(lambda: str(torch.ones(2, device="npu").double().dtype)),
        "sharded_scaler_exempt": bool(
            getattr(ShardedGradScaler.unscale_, "__npu_migrate_float64_exempt__", False)
        ),
    }


report = {"views": views(), "legacy": legacy()}
if "--strict" in sys.argv:
    report["strict"] = outcome(strict_scaler)
print(json.dumps(report))
