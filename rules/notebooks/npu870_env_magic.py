"""NPU870: ``%env CUDA_VISIBLE_DEVICES=0`` in a notebook -> ``%env ASCEND_RT_VISIBLE_DEVICES=0``."""

from __future__ import annotations

import re

from npu_migrate.notebooks.rule import Example, NotebookRule
from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.tables.env_vars import ADVICE, IFNAME_ADVICE, advice, ascend_name, pinned_interface

_ENV = re.compile(r"^(\s*%(?:env|set_env)\s+)([A-Za-z_][A-Za-z0-9_]*)(?=[\s=]|$)")


class EnvMagic(NotebookRule):
    id = "NPU870"
    name = "env-magic"
    summary = "Rename CUDA/NCCL variables set with `%env` / `%set_env` in notebooks; report those without an Ascend counterpart"
    rationale = """
`%env NAME=value` (and `%env NAME value`, `%set_env NAME=value`) sets an
environment variable of the kernel, as `os.environ[...]` does in Python
(NPU106/NPU203) and `export` in a launcher. Variables with an Ascend
counterpart of the same meaning are renamed (`CUDA_VISIBLE_DEVICES` ->
`ASCEND_RT_VISIBLE_DEVICES`, `NCCL_SOCKET_IFNAME` -> `HCCL_SOCKET_IFNAME`...,
the table shared with the Python and shell rules,
`npu_migrate/tables/env_vars.py`); NCCL variables without one are reported
with the nearest HCCL/CANN setting. `NCCL_SOCKET_IFNAME` is renamed only when
its value is portable (an exclusion list `^lo,docker0`, or `$IFNAME`): a literal
such as `eth0` names this cluster's NICs, which HCCL would look for on the
Ascend hosts and fail at init without, so that line is reported. Like `CUDA_VISIBLE_DEVICES`, the Ascend
variable must be set before torch_npu initialises the device: keep the
`%env` line above the first cell that imports torch.
"""
    examples = (
        Example("%env CUDA_VISIBLE_DEVICES=0\nimport torch\n", "%env ASCEND_RT_VISIBLE_DEVICES=0\nimport torch\n"),
        Example("%env NCCL_DEBUG=INFO  # reported\n"),
        Example("%env MY_FLAG=1\n"),
    )

    def __init__(self, file) -> None:
        super().__init__(file)
        self.env_vars = load_api().env_vars

    def visit_line(self, line) -> None:
        match = _ENV.match(line.text)
        if match is None:
            return
        name = match.group(2)
        new = ascend_name(name, self.env_vars)
        if new is not None and pinned_interface(name, line.text):
            self.report(line, match.start(2), f"`{name}` is set to a literal naming this cluster's network "
                        "interfaces; left unchanged", IFNAME_ADVICE)
        elif new is not None:
            self.replace(line, line.text[: match.start(2)] + new + line.text[match.end(2) :], f"`{name}` -> `{new}`")
        elif name in ADVICE or name.startswith(("NCCL_", "TORCH_NCCL_")):
            self.report(line, match.start(2), f"`{name}` has no Ascend counterpart of the same meaning", advice(name))
