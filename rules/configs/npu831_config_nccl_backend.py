"""NPU831: ``backend: nccl`` in a config file -> ``hccl``."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.tables.backends import is_backend_key, other_systems_owner

from ._values import setting


class ConfigNcclBackend(ConfigRule):
    id = "NPU831"
    name = "config-nccl-backend"
    summary = "Rewrite the `nccl` process-group backend to `hccl` where a config key (or option) holds a backend"
    triggers = (b"nccl",)
    targets = ("npu", "cpu")  # the CPU for verify's reference twin: `gloo`
    rationale = """
NCCL does not exist on Ascend; HCCL is its counterpart, and torch_npu
registers it as the `hccl` process-group backend. A value naming nccl (`nccl`,
or a per-device spec such as `cpu:gloo,cuda:nccl`, which becomes
`cpu:gloo,npu:hccl`) under a key that holds a process-group backend is
rewritten. Backend keys (`npu_migrate/tables/backends.py`): `backend`,
`dist_backend`, `distributed_backend`, `ddp_backend`, `process_group_backend`,
`pg_backend`, with any prefix (`trainer.dist_backend`); not `rdzv_backend`,
`attention_backend`, `compile_backend` and the like, which never hold nccl.
`name=value` strings and argument lists work as for NPU830.

`nccl` under any other key is reported by NPU832. Lightning's
`process_group_backend` in a file whose trainer keeps `accelerator: gpu`
(`cuda`, `auto`; NPU970 reports it) is reported and left with it. A backend key below another
system's engine (`checkpoint_engine:`, `weight_transfer`, `kv_transfer`,
`kv_connector`: verl registers its HCCL checkpoint engine under `nccl` too, so
`hccl` would name no engine) is reported, not rewritten.
"""
    examples = (
        Example("dist:\n  backend: nccl\n  init_method: env://\n", "dist:\n  backend: hccl\n  init_method: env://\n"),
        Example('{"dist_backend": "nccl"}\n', '{"dist_backend": "hccl"}\n'),
        Example("rdzv_backend: c10d\n"),
        Example("trainer:\n  accelerator: gpu\n  strategy:\n    process_group_backend: nccl\n"),
        Example("rollout:\n  checkpoint_engine:\n    backend: nccl  # reported: verl's engine name\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key or "nccl" not in scalar.value or not scalar.editable:
            return
        found = setting(scalar, self.file.previous)
        if found.name is None or not is_backend_key(found.name):
            return
        owner = other_systems_owner([*scalar.keys[:-1], *found.name.split(".")[:-1]])
        if owner is not None:
            self.report(scalar, f"`{found.value}` under `{owner}` is that engine's own name for its transport, not a "
                        "process-group backend; left unchanged",
                        "check that engine's documentation for its Ascend name (verl registers its HCCL checkpoint "
                        "engine under `nccl` too)")
            return
        if found.name.rsplit(".", 1)[-1] == "process_group_backend" and self._lightning_on_gpu():
            self.report(scalar, f"`{found.value}` is the backend of a Lightning strategy whose trainer keeps "
                        "`accelerator: gpu` (or `cuda`/`auto`, reported by NPU970); left with it",
                        "move the trainer to an Ascend accelerator first, then set this to hccl")
            return
        new = self.file.target.backend_string(found.value)  # hccl_backend's spec for the NPU
        if new is not None:
            self.replace(scalar, found.replaced(scalar, new), f"backend `{found.value}` -> `{new}` ({found.name})",
                         reason=f"the value of the config key `{found.name}`, a name that holds a process-group backend")

    def _lightning_on_gpu(self) -> bool:
        """The file's Lightning trainer keeps a CUDA (or automatic) accelerator: on Ascend it
        does not start, and on the GPU an hccl backend would not (fish-speech's base.yaml,
        held-out round 21)."""
        from npu_migrate.rules.cluster.configs.npu970_config_lightning_accelerator import (
            selects_device,
        )

        return any(not s.is_key and s.key == "accelerator" and selects_device(s) is not None
                   for s in self.file.document.scalars)

