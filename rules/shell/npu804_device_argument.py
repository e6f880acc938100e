"""NPU804: ``--device cuda`` and friends on training command lines."""

from __future__ import annotations

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.tables.devices import is_device_key, npu_device

from ._arguments import ValueRule


class ShellDeviceArgument(ValueRule):
    id = "NPU804"
    name = "shell-device-argument"
    summary = "Rewrite `cuda` / `cuda:N` devices passed by launch scripts (`--device cuda`, `--device=cuda:0`) to `npu`"
    triggers = (b"cuda",)
    kind = "device"
    rationale = """
`--device cuda` makes a migrated script ask torch for a CUDA device, which does
not exist on an Ascend machine. `cuda` and `cuda:N` (also `cuda:$LOCAL_RANK`)
become `npu` / `npu:N` in the same places NPU803 looks for backends: options of
training command lines (`--device`, `--device_type`, `--eval-device`, Hydra
`trainer.device=`, yacs `MODEL.DEVICE cuda`), argument arrays and option
strings in variables, variables named for a device (`DEVICE=cuda`,
`${DEVICE:-cuda}`), variables passed as a device option's value (and their
defaults: `--device ${WHERE:-cuda}`), and
comparisons with them (`[ "$DEVICE" = cuda ]`, `case $DEVICE in cuda:*)`).
Which names hold a device is decided by the table the Python rules use
(`npu_migrate/tables/devices.py`): `--device_map auto`, `--num-devices 8` and
`--devices 0,1` are not devices. Prose stays.

A launch command's values reach torch only through the script it runs
(`npu_migrate/shell/targets.py`): where that script (its first `.py` word) is not
in the project, what this and the other shell rules would rewrite in the command
is reported instead; where it runs under the project's `transfer_to_npu`, its
device (and NPU803's backend) values stay, since torch_npu maps them at run time.
"""
    examples = (
        Example("python train.py --device cuda:0 --epochs 10\n", "python train.py --device npu:0 --epochs 10\n"),
        Example('DEVICE=${DEVICE:-cuda}\nif [ "$DEVICE" = "cuda" ]; then echo GPU; fi\npython eval.py --device "$DEVICE"\n',
                'DEVICE=${DEVICE:-npu}\nif [ "$DEVICE" = "npu" ]; then echo GPU; fi\npython eval.py --device "$DEVICE"\n'),
        Example('echo "pass --device cuda to use the GPU"\npython train.py --device_map auto\n'),
    )

    @classmethod
    def is_key(cls, name: str) -> bool:
        return is_device_key(name)

    @classmethod
    def new_value(cls, value: str) -> str | None:
        return npu_device(value)

    @classmethod
    def new_pattern(cls, pattern: str) -> str | None:
        if pattern == "cuda" or pattern.startswith("cuda:"):
            return "npu" + pattern[4:]
        return None
