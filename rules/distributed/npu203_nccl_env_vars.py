"""NPU203: NCCL environment variables -> their HCCL / TORCH_HCCL counterparts."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.python.cst_util import string_value, with_string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.tables.env_vars import IFNAME_ADVICE, advice, ascend_name, pinned_interface

_ENV_NAME = re.compile(r"^(TORCH_)?NCCL_[A-Z0-9_]+$")
#: The families of variables NCCL documents (its "Environment Variables" page) and torch's
#: TORCH_NCCL_* switches: a string that is one of these names an NCCL setting wherever it is.
#: Another NCCL_* string (prime-rl's ``NCCL_READY_MARKER = "NCCL_READY"``, a marker file's
#: name) is one only where the code reads or writes the environment with it.
_DOCUMENTED = re.compile(
    r"^(?:TORCH_NCCL_\w+|NCCL_(?:SOCKET_\w+|NSOCKS_PERTHREAD|CROSS_NIC|IB_\w+|OOB_\w+|UID_\w+|NET\w*|P2P_\w+|"
    r"SHM_\w+|BUFFSIZE|NTHREADS|(?:MAX|MIN)_\w+|CHECK\w*|LAUNCH_MODE|IGNORE_CPU_AFFINITY|CONF_FILE|DEBUG\w*|"
    r"COLLNET_\w+|TOPO_\w+|SET_\w+|GRAPH_\w+|ALGO|PROTO|NVB_\w+|PXN_\w+|RUNTIME_CONNECT|CUMEM_\w+|NVLS\w*|"
    r"MNNVL_\w+|RAS_\w+|CTA_POLICY|TUNER_\w+|PROFILER_\w+|LOCAL_REGISTER|LEGACY_CUDA_REGISTER|WIN_\w+|"
    r"NCHANNELS\w*|ASYNC_ERROR_HANDLING|BLOCKING_WAIT|DESYNC_DEBUG|TIMEOUT|LL\w*_THRESHOLD|TREE_THRESHOLD|"
    r"COMM_\w+|GDR_\w+|DMABUF_\w+|FASTRAK_\w+|GPUDIRECTTCPX\w*|SHIMNET_\w+|DMA_\w+|MAX_CTAS|MIN_CTAS|"
    r"NVTX_\w+|HOSTID|ENABLE_\w+|PLUGIN_\w+))$")
#: calls whose string argument is an environment variable's name
_ENV_CALLS = frozenset({"getenv", "putenv", "unsetenv", "get", "setdefault", "pop"})

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
  environment-variable reference), but only where its value is portable: an
  exclusion list (`"^lo,docker0"`) or anything that is not a string literal
  (`os.environ["NCCL_SOCKET_IFNAME"] = ifname`, `os.environ.get(...)`). A string
  literal naming interfaces (`"eth0"`, `"ib"`, `"bond0,eth1"`; in an
  `os.environ` write, `setdefault`, an `env={...}` dict, a launcher's
  `{"name": ..., "value": "ib"}` list) names the NVIDIA cluster's NICs: HCCL
  would fail at init on an Ascend host without that interface, so every mention
  of the variable in that file is left as it is and reported.

Everything else is reported with what to do instead. Deliberately not renamed:
`NCCL_BUFFSIZE` (HCCL_BUFFSIZE is in MB, NCCL's in bytes), `NCCL_ALGO` (different
value syntax), `NCCL_IB_TC/SL` (closest are HCCL_RDMA_TC/SL, matched by meaning
only), `NCCL_DEBUG` (no HCCL_DEBUG). Variables inside shell command strings or
f-strings are not touched (`.sh` launchers are outside this tool's scope).
A string is taken for an NCCL variable where NCCL documents that family
(`NCCL_IB_*`, `NCCL_P2P_*`, `NCCL_DEBUG`..., and torch's `TORCH_NCCL_*`) or where
the code reads or writes the environment with it (`os.environ[...]`, `getenv`, a
dict key); another `NCCL_*` string, such as a marker file's name
(`NCCL_READY_MARKER = "NCCL_READY"`), is not reported.
A class field named for an NCCL variable (`NCCL_DEBUG: str = "INFO"` in a
settings class whose fields are exported to the environment by name) is
reported, not renamed: the name is also the key configs and command lines use.
"""
    examples = (
        Example(
            'import os\nos.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"\n',
            'import os\nos.environ["TORCH_HCCL_ASYNC_ERROR_HANDLING"] = "1"\n',
        ),
        Example('import os\nos.environ.setdefault("NCCL_DEBUG", "INFO")  # reported\n'),
        Example('import os\nos.environ["NCCL_SOCKET_IFNAME"] = "eth0"  # reported: the NVIDIA hosts\' NIC\n'),
        Example('import os\nos.environ["NCCL_SOCKET_IFNAME"] = "^lo,docker0"\n',
                'import os\nos.environ["HCCL_SOCKET_IFNAME"] = "^lo,docker0"\n'),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.env_vars = load_api().env_vars

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and _ENV_NAME.match(value) and (_DOCUMENTED.match(value) or self._names_env(node)):
            self._handle(node, value, lambda n, new: with_string_value(n, new))

    def _names_env(self, node: cst.SimpleString) -> bool:
        """The string is used as an environment variable's name: ``os.environ["X"]``,
        ``os.getenv("X")``, ``environ.get/setdefault/pop("X")``, a key of a dict literal
        (an ``env={...}`` for a subprocess, a launcher's env list)."""
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.SubscriptElement) or isinstance(parent, cst.Index):
            return True
        if isinstance(parent, cst.DictElement) and parent.key is node:
            return True
        if isinstance(parent, cst.Arg):
            call = self.ctx.parent(parent)
            func = call.func if isinstance(call, cst.Call) else None
            name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            return name in _ENV_CALLS
        return False

    def visit_Arg(self, node: cst.Arg) -> None:
        """``dict(os.environ, NCCL_P2P_DISABLE="1")``: the variable is a keyword name."""
        if node.keyword is not None and _ENV_NAME.match(node.keyword.value):
            self._handle(node.keyword, node.keyword.value, lambda n, new: n.with_changes(value=new))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        """``NCCL_DEBUG: str = "INFO"`` in a class body: a settings class whose fields are
        exported as environment variables by name (lingua's ``EnvironmentArgs``). Renaming
        a field would break whatever reads it by that name (configs, command lines), so it
        is reported with the HCCL name to use."""
        target = node.target
        if not (isinstance(target, cst.Name) and _ENV_NAME.match(target.value)):
            return
        if not isinstance(self.ctx.parent(self.ctx.parent(node)), cst.IndentedBlock) or not isinstance(
                self.ctx.parent(self.ctx.parent(self.ctx.parent(node))), cst.ClassDef):
            return
        new = ascend_name(target.value, self.env_vars)
        if new is not None:
            self.report(target, f"`{target.value}` is a field named for an NCCL variable; exported to the environment "
                                "by that name, HCCL ignores it", f"name the field (or the variable it sets) `{new}`")
        else:
            self.report(target, f"`{target.value}` is a field named for an NCCL variable, which HCCL does not read",
                        advice(target.value))

    def _handle(self, node: cst.CSTNode, value: str, rename) -> None:
        new = ascend_name(value, self.env_vars)
        if new is not None and pinned_interface(value, self.ctx.text, python=True):
            self.report(node, f"`{value}` is set to a string literal naming this cluster's network interfaces; "
                              "left unchanged", IFNAME_ADVICE)
            return
        if new is not None:
            self.replace(node, lambda n: rename(n, new), f"`{value}` -> `{new}`", needs_torch_npu=False)
            return
        self.report(node, f"`{value}` has no effect on Ascend (HCCL does not read NCCL variables)", advice(value))
