"""Strict-mode checks; print a JSON report. Run with and without ``--strict``."""

import json

import torch
import torch_npu  # noqa: F401


def outcome(fn):
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "type": type(exc).__name__, "msg": str(exc)[:400]}
    return {"ok": True, "value": value}


x = torch.randn(4, device="npu")
print(
    json.dumps(
        {
            "float32": outcome(lambda: (x * 2).sum().item() is not None),
            "factory_f64": outcome(
                lambda: str(torch.zeros(3, dtype=torch.float64, device="npu").dtype)
            ),
            "to_double": outcome(lambda: str(x.double().dtype)),
            "cpu_f64_to_npu": outcome(
                lambda: str(torch.zeros(2, dtype=torch.float64).npu().dtype)
            ),
            "cpu_f64_stays_ok": outcome(
                lambda: torch.zeros(2, dtype=torch.float64).sum().item()
            ),
            "denied_op": outcome(lambda: x.median().item() is not None),
            "allowed_op": outcome(lambda: x.max().item() is not None),
        }
    )
)
