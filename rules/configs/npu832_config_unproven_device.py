"""NPU832: report CUDA device and nccl values that NPU830/NPU831 cannot rewrite."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.tables.backends import is_backend_key, mentions_nccl
from npu_migrate.tables.devices import is_device_key, npu_device

from ._values import setting

_CUDA_WORD = re.compile(r"(?<![\w.\-/])cuda(?![\w\-/])")
#: Words separated by spaces: a sentence, not a value (``train on cuda GPUs``).
_PROSE = re.compile(r"\w\s+\w")


class ConfigUnprovenDevice(ConfigRule):
    id = "NPU832"
    name = "config-unproven-device"
    summary = "Report config values that look like a CUDA device or the nccl backend where NPU830/NPU831 cannot rewrite them"
    fixable = False
    triggers = (b"cuda", b"nccl")
    rationale = """
The config counterpart of NPU108. NPU830 and NPU831 rewrite a value only under
a key that holds a device or a backend. A value that is exactly a CUDA device
(`cuda`, `cuda:1`) or an nccl backend spec under any other key
(`gpu: cuda:0`, `target: cuda`, `devices: [cuda:0, cuda:1]`,
`{cuda: nccl, cpu: gloo}`), a device or backend key whose
value only contains one (`device: ${oc.env:DEVICE,cuda}`,
`device: cuda:0,1`, not a sentence) and a value NPU830/NPU831 would rewrite but whose text has
escapes or spans lines is reported on its line, so none is left behind
silently. Prose (`description: train on cuda GPUs`) is not reported.

Fix by hand: write `npu` where it is a device and `hccl` where it is a backend.
In YAML and TOML, `# npu-migrate: ignore[NPU832]` at the end of the line
silences a value that is not a device.
"""
    examples = (
        Example("gpu: cuda:0  # reported\nbackends: {cuda: nccl, cpu: gloo}  # reported (nccl)\n"),
        Example("matrix:\n  cuda: '12.1'\n"),
        Example("device: ${oc.env:DEVICE,cuda}  # reported\n"),
        Example("description: train on cuda GPUs with nccl\n"),
    )

    def visit_scalar(self, scalar) -> None:
        value = scalar.value
        if "cuda" not in value and "nccl" not in value:
            return
        if scalar.is_key:
            return  # a key named cuda holds anything (a CUDA version in a CI matrix); its value is judged
        if "ports" in scalar.keys:
            return  # a network port's name (a Kubernetes Service's `name: nccl`, `targetPort: nccl`)
        found = setting(scalar, self.file.previous)
        name = found.name or "a list item"
        device_key = found.name is not None and is_device_key(found.name)
        backend_key = found.name is not None and is_backend_key(found.name)
        if npu_device(found.value) is not None:
            if found.name == "accelerator" and found.value == "cuda":
                return  # Lightning's accelerator: NPU834
            if not device_key:
                self.report(scalar, f"`{found.value}` under `{name}` looks like a CUDA device, but `{name}` is not "
                            "known to hold a device; left unchanged",
                            "if it is a device write `npu` (same index); otherwise add `# npu-migrate: ignore[NPU832]`")
            elif not scalar.editable:
                self.report(scalar, f"`{found.value}` is a CUDA device, but its text has escapes or spans lines; "
                            "left unchanged", "write `npu` (same index) by hand")
        elif mentions_nccl(found.value):
            if not backend_key:
                self.report(scalar, f"`{found.value}` under `{name}` names the nccl backend, but `{name}` is not "
                            "known to hold a process-group backend; left unchanged",
                            "if it is a backend write `hccl`; otherwise add `# npu-migrate: ignore[NPU832]`")
            elif not scalar.editable:
                self.report(scalar, f"`{found.value}` names the nccl backend, but its text has escapes or spans "
                            "lines; left unchanged", "write `hccl` by hand")
        elif device_key and _CUDA_WORD.search(found.value) and not _PROSE.search(found.value):
            self.report(scalar, f"`{found.name}` holds `{found.value}`, which mentions a CUDA device; left unchanged",
                        "write the NPU device (`npu`, `npu:N`) in its place")
        elif backend_key and re.search(r"\bnccl\b", found.value) and not _PROSE.search(found.value):
            self.report(scalar, f"`{found.name}` holds `{found.value}`, which mentions nccl; left unchanged",
                        "write `hccl` in its place")
