"""NPU830: ``device: cuda`` / ``device: cuda:1`` in a config file -> ``npu`` / ``npu:1``."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.tables.devices import is_device_key, npu_device

from ._values import setting

#: sections whose `device` is an environment's or a simulator's, not torch's
SIMULATOR_SECTIONS = frozenset({"env_config", "env", "environment", "sim", "simulation", "simulator", "physics"})


#: config sections and keys whose devices are another system's: LMCache and NIXL transfer
#: buffers (vLLM production-stack's `nixlBufferDevice`), onnxruntime, TensorRT
_OTHER_SYSTEM = re.compile(r"nixl|lmcache|onnx|tensorrt", re.IGNORECASE)

class ConfigCudaDevice(ConfigRule):
    id = "NPU830"
    name = "config-cuda-device"
    summary = "Rewrite `cuda` / `cuda:N` to `npu` / `npu:N` where a config key (or option) holds a device"
    triggers = (b"cuda",)
    targets = ("npu", "cpu")  # the CPU for verify's reference twin: `cuda:1` -> `cpu:1`
    rationale = """
Training configs (YAML, Hydra/OmegaConf, JSON, TOML) name the device the code
then passes to `torch.device(cfg.device)` or `.to(cfg.device)`. A value that is
exactly a CUDA device (`cuda`, `cuda:0`, `cuda:${local_rank}`) under a key that
holds a device becomes the NPU device with the same index. Keys that hold a
device are named like one (`npu_migrate/tables/devices.py`): `device`,
`*_device` (`eval_device`, `train.device`, `MODEL.DEVICE`), `device_type`,
`dev`, `map_location`; not `device_count`, `num_devices`, `device_ids`,
`devices` (counts and lists, often not strings at all). The same holds for
`name=value` strings (Hydra overrides `trainer.device=cuda`, `--device=cuda`)
and for an argument list whose previous item is the option
(`args: ["--device", "cuda:0"]` in VS Code's launch.json).

A device below a section named for an environment or a simulator (`env_config`,
`env`, `sim`, `simulation`, `physics`...) is the simulator's (rl_games' mjlab
configs hand `env_config.device` to MuJoCo Warp, which takes cuda or cpu): it is
reported, not rewritten (held-out round 22).

Only the scalar's text changes; its quoting and everything around it stay.
Values under other keys are reported by NPU832, not rewritten. In YAML and
TOML, `# npu-migrate: ignore[NPU830]` at the end of the line keeps a value.
"""
    examples = (
        Example("env_config:\n  device: cuda\n"),
        Example("device: cuda  # training device\neval_device: 'cuda:1'\n",
                "device: npu  # training device\neval_device: 'npu:1'\n"),
        Example('overrides:\n- trainer.device=cuda:0\n', 'overrides:\n- trainer.device=npu:0\n'),
        Example("num_devices: 8\ndescription: train on cuda\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key or "cuda" not in scalar.value or not scalar.editable:
            return
        found = setting(scalar, self.file.previous)
        if found.name is None or not is_device_key(found.name):
            return
        section = next((k for k in scalar.keys[:-1] if k.lower() in SIMULATOR_SECTIONS), None)
        if section is not None and npu_device(found.value) is not None:
            # rl_games' `env_config: device: cuda` goes to the environment (mjlab on MuJoCo Warp,
            # Isaac Gym's PhysX), which takes cuda or cpu and knows no "npu" (held-out round 22)
            self.report(scalar, f"`{found.value}` under `{section}:` is the environment's or simulator's device, not "
                        "torch's; left unchanged", "keep the simulator on a device it supports (cpu on an Ascend "
                        "machine); the policy's device is set where torch reads it")
            return
        other = next((k for k in [*scalar.keys[:-1], found.name] if _OTHER_SYSTEM.search(k)), None)
        if other is not None and npu_device(found.value) is not None:
            # vLLM production-stack's `lmcacheConfig: nixlBufferDevice: "cuda"`: LMCache's NIXL
            # transfer buffer, which takes "cpu" or "cuda" (held-out audit of issue 36)
            self.report(scalar, f"`{found.value}` at `{found.name}` is a device of {_OTHER_SYSTEM.search(other).group(0)}'s "
                        f"(under `{other}`), not torch's; left unchanged",
                        "keep a device that system supports (its docs list cpu or cuda); on Ascend use its CPU "
                        "buffer or its Ascend build's own setting")
            return
        if npu_device(found.value) is not None:  # a CUDA device: the target's with the same index
            new = self.file.target.device_string(found.value)
            self.replace(scalar, found.replaced(scalar, new), f"`{found.value}` -> `{new}` ({found.name})",
                         reason=f"the value of the config key `{found.name}`, a name that holds a device")
