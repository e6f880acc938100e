"""What a migration writes for CUDA: the Ascend NPU (the product), or the CPU.

Every rule migrates *to* a target. The default, :data:`NPU`, is what users get:
``'cuda'`` -> ``'npu'``, ``nccl`` -> ``hccl``, ``torch.cuda.X`` -> ``torch.npu.X``.
:data:`CPU` exists for ``npu-migrate verify``: its reference twin is the same
source migrated by the same rules to the CPU (``'cuda'`` -> ``'cpu'``, ``nccl``
-> ``gloo``, ``torch.amp.autocast("cpu")``, ``GradScaler("cpu")``), so that the
migrated NPU code can be compared with what the original computes.

A rule declares the targets it knows (``RuleBase.targets``; ``("npu",)`` unless
it says more). Rules that only make sense for the NPU (``import torch_npu``,
``torch.cuda.X`` -> ``torch.npu.X``, ``.cuda()`` -> ``.npu()``, env variables,
the runtime shim) do not run for the CPU: there, what they would rewrite is left
as CUDA code and answered at run time by verify's CUDA-on-CPU layer
(``npu_migrate/verify/cuda_on_cpu.py``). See docs/verify.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    #: The name used in settings and in ``RuleBase.targets``.
    name: str
    #: The device type written where CUDA code names ``cuda`` (the index is kept:
    #: ``cuda:1`` -> ``npu:1`` / ``cpu:1``, which torch accepts for the CPU too).
    device: str
    #: The process-group backend written for ``nccl``.
    backend: str

    def device_string(self, cuda_value: str) -> str:
        """``cuda:1`` -> ``npu:1`` (or ``cpu:1``); other text is returned as it is."""
        return self.device + cuda_value[4:] if cuda_value.startswith("cuda") else cuda_value

    def backend_string(self, nccl_value: str) -> str | None:
        """The backend spec for ``nccl_value`` (``nccl`` or a composite such as
        ``cpu:gloo,cuda:nccl``), None when it needs no change or cannot be mapped."""
        from npu_migrate.tables.backends import hccl_backend

        new = hccl_backend(nccl_value)
        if new is None or self.name == "npu":
            return new
        return self.backend  # the CPU runs every collective on gloo


NPU = Target(name="npu", device="npu", backend="hccl")
CPU = Target(name="cpu", device="cpu", backend="gloo")
TARGETS = {t.name: t for t in (NPU, CPU)}


def named(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown migration target {name!r} (known: {', '.join(TARGETS)})") from None


def rule_ids_for(name: str) -> list[str]:
    """Ids of the rules that can migrate to target ``name``."""
    from npu_migrate.pipeline.registry import all_rules

    return [rid for rid, rule in all_rules().items() if name in rule.targets]
