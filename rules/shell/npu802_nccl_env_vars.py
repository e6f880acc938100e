"""NPU802: NCCL environment variables in shell scripts."""

from __future__ import annotations

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.tables.env_vars import is_nccl_variable

from ._env import EnvVarRule


class ShellNcclEnvVars(EnvVarRule):
    id = "NPU802"
    name = "shell-nccl-env-vars"
    summary = "Rename NCCL environment variables in shell scripts to their HCCL counterparts; report the others"
    triggers = (b"NCCL_",)
    what = "NCCL"
    rationale = """
HCCL ignores `NCCL_*` variables. The launcher's variables get the treatment
NPU203 gives them in Python, from the same table
(`npu_migrate/tables/env_vars.py`): `NCCL_SOCKET_IFNAME` -> `HCCL_SOCKET_IFNAME`,
`NCCL_ASYNC_ERROR_HANDLING` / `NCCL_BLOCKING_WAIT` / `NCCL_DESYNC_DEBUG` ->
`HCCL_*`, `TORCH_NCCL_X` -> `TORCH_HCCL_X` where torch_npu reads it. The others
(`NCCL_DEBUG`, `NCCL_IB_*`, `NCCL_P2P_*`, `NCCL_BUFFSIZE`...) are reported on
their line with the nearest HCCL/CANN setting (`NCCL_DEBUG`: CANN logging via
`ASCEND_GLOBAL_LOG_LEVEL`; `NCCL_BUFFSIZE`: `HCCL_BUFFSIZE`, in MB).
Renamed and reported wherever the shell treats the name as a variable, as in
NPU801; prose is left alone. A script that configures an NVIDIA-specific network
stack (GPUDirect-TCPX(O)/FasTrak, an NCCL net, tuner or shim plugin) is that
platform's profile: its variables are reported, not renamed (here and in NPU801),
since their values (NIC names, GPU sets) belong to that machine.
Likewise `NCCL_SOCKET_IFNAME` is renamed only when every value the script gives
it is portable: an exclusion list (`^lo,docker0`) or one taken from elsewhere
(`$IFNAME`, `${IFNAME:-eth0}`, `$(cmd)`). A literal naming interfaces (`eth0`,
`ib`, `bond0,eth1`, `=enp0s12`) names the NVIDIA cluster's NICs; HCCL fails at
init on a host without that interface, so the variable is left as it is in the
whole script (its reads and writes keep agreeing) and reported.
"""
    examples = (
        Example(
            'export NCCL_SOCKET_IFNAME=^lo,docker0\nexport TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n',
            'export HCCL_SOCKET_IFNAME=^lo,docker0\nexport TORCH_HCCL_ASYNC_ERROR_HANDLING=1\n',
        ),
        Example('export NCCL_SOCKET_IFNAME=eth0  # reported: the NVIDIA hosts\' NIC\n'),
        Example('export NCCL_DEBUG=INFO  # reported: CANN logs with ASCEND_GLOBAL_LOG_LEVEL\n'),
    )

    @classmethod
    def concerns(cls, name: str) -> bool:
        return is_nccl_variable(name)
