"""NPU203: NCCL environment variables -> their HCCL / TORCH_HCCL counterparts."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.cst_util import string_value, with_string_value
from npu_migrate.npu_api import load_api
from npu_migrate.rule import Example, Rule

_ENV_NAME = re.compile(r"^(TORCH_)?NCCL_[A-Z0-9_]+$")

#: NCCL_X whose HCCL_X counterpart has the same meaning and value format. The
#: first three are ProcessGroup watchdog switches that torch_npu reads under both
#: spellings (libtorch_npu.so literals); HCCL_SOCKET_IFNAME is read by HCCL itself
#: (CANN environment-variable reference), not by torch_npu.
SAME_MEANING = {
    "NCCL_ASYNC_ERROR_HANDLING": "HCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT": "HCCL_BLOCKING_WAIT",
    "NCCL_DESYNC_DEBUG": "HCCL_DESYNC_DEBUG",
    "NCCL_SOCKET_IFNAME": "HCCL_SOCKET_IFNAME",
}

#: NCCL variables with no drop-in counterpart: what to do instead.
ADVICE = {
    "NCCL_DEBUG": (
        "HCCL has no NCCL_DEBUG; CANN logging is set with ASCEND_GLOBAL_LOG_LEVEL "
        "(0 debug, 1 info, 2 warning, 3 error), which covers all of CANN, not only collectives"
    ),
    "NCCL_DEBUG_SUBSYS": "no HCCL counterpart; use ASCEND_GLOBAL_LOG_LEVEL for CANN logs",
    "NCCL_DEBUG_FILE": "no HCCL counterpart; CANN writes its logs under ~/ascend/log",
    "NCCL_BUFFSIZE": "use HCCL_BUFFSIZE, but its unit is megabytes (default 200) while NCCL_BUFFSIZE is in bytes: convert the value",
    "NCCL_ALGO": "HCCL_ALGO exists but takes a different syntax (per level, e.g. 'level0:NA;level1:ring'); set it by hand or drop it",
    "NCCL_IB_TC": "the closest is HCCL_RDMA_TC (RDMA traffic class); check the value range in the CANN docs before setting it",
    "NCCL_IB_SL": "the closest is HCCL_RDMA_SL (RDMA service level); check the value range in the CANN docs before setting it",
    "NCCL_TIMEOUT": "HCCL uses HCCL_CONNECT_TIMEOUT (link setup, default 120 s) and HCCL_EXEC_TIMEOUT (per collective, default 1836 s)",
    "NCCL_IB_TIMEOUT": "HCCL uses HCCL_CONNECT_TIMEOUT and HCCL_EXEC_TIMEOUT (seconds); NCCL_IB_TIMEOUT is an exponent, do not copy its value",
}
GENERIC = "no HCCL counterpart in torch_npu 2.13; remove it, or look up the HCCL setting in the CANN environment-variable reference"


def hccl_name(name: str, env_vars: frozenset[str]) -> str | None:
    """The Ascend variable that means the same as ``name``, if there is one."""
    if name.startswith("TORCH_NCCL_"):
        candidate = "TORCH_HCCL_" + name[len("TORCH_NCCL_") :]
        return candidate if candidate in env_vars else None
    return SAME_MEANING.get(name)


class NcclEnvVars(Rule):
    id = "NPU203"
    name = "nccl-env-vars"
    summary = "Rename NCCL environment variables that have an HCCL counterpart; report the others"
    triggers = ("NCCL_*", "TORCH_NCCL_*")
    rationale = """
HCCL ignores `NCCL_*` variables, so settings made through them silently stop
applying. A string literal that is exactly an NCCL variable name
(`os.environ["NCCL_BLOCKING_WAIT"]`, `os.getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING")`,
an `env={...}` dict for a subprocess) is renamed when the Ascend variable means
the same thing and takes the same values:

- `TORCH_NCCL_X` -> `TORCH_HCCL_X` for every X that torch_npu 2.13 reads (the
  `env_vars` list of `npu_migrate/data/torch_npu_api.json`: async error
  handling, blocking wait, desync debug, dump on timeout, trace buffer size,
  monitoring, heartbeat timeout, high priority, debug info files...);
- `NCCL_ASYNC_ERROR_HANDLING`, `NCCL_BLOCKING_WAIT`, `NCCL_DESYNC_DEBUG` ->
  `HCCL_*` (torch_npu reads both spellings, like torch does for NCCL);
- `NCCL_SOCKET_IFNAME` -> `HCCL_SOCKET_IFNAME` (read by HCCL, per the CANN
  environment-variable reference).

Everything else is reported with what to do instead. Deliberately not renamed:
`NCCL_BUFFSIZE` (HCCL_BUFFSIZE is in MB, NCCL's in bytes), `NCCL_ALGO` (different
value syntax), `NCCL_IB_TC/SL` (closest are HCCL_RDMA_TC/SL, matched by meaning
only), `NCCL_DEBUG` (no HCCL_DEBUG). Variables inside shell command strings or
f-strings are not touched (`.sh` launchers are outside this tool's scope).
"""
    examples = (
        Example(
            'import os\nos.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"\n',
            'import os\nos.environ["TORCH_HCCL_ASYNC_ERROR_HANDLING"] = "1"\n',
        ),
        Example('import os\nos.environ.setdefault("NCCL_DEBUG", "INFO")  # reported\n'),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.env_vars = load_api().env_vars

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and _ENV_NAME.match(value):
            self._handle(node, value, lambda n, new: with_string_value(n, new))

    def visit_Arg(self, node: cst.Arg) -> None:
        """``dict(os.environ, NCCL_P2P_DISABLE="1")``: the variable is a keyword name."""
        if node.keyword is not None and _ENV_NAME.match(node.keyword.value):
            self._handle(node.keyword, node.keyword.value, lambda n, new: n.with_changes(value=new))

    def _handle(self, node: cst.CSTNode, value: str, rename) -> None:
        new = hccl_name(value, self.env_vars)
        if new is not None:
            self.replace(node, lambda n: rename(n, new), f"`{value}` -> `{new}`", needs_torch_npu=False)
            return
        self.report(node, f"`{value}` has no effect on Ascend (HCCL does not read NCCL variables)", ADVICE.get(value, GENERIC))
