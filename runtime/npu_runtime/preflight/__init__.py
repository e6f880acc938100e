"""Check a training node before (or at) job start: ``python -m npu_runtime.preflight``.

Standard library only (it must run where torch is not importable, and fast). It
reads what ``init_distributed()`` reads and what the CANN cluster guide asks of a
node, and prints one line per problem with its fix:

====================  ==========================================================
module                checks
====================  ==========================================================
``launch_env``        every launcher's variables resolve, and all sources agree
``devices``           NPUs found (``npu-smi``, ``/dev/davinci*``): count, health, NPUs per
                      node, ``ASCEND_RT_VISIBLE_DEVICES`` ascending and valid
``stack``             driver, CANN, torch and torch_npu: present, importable, paired
``ranktable_checks``  device ids, this host listed, NPUs per server, device IPs
``hccl``              HCCL_CONNECT_TIMEOUT (with a ranktable), HCCL ports
``sysctl``            HCCL ports reserved, somaxconn and SYN backlog vs job size
``network``           MASTER_ADDR:MASTER_PORT resolves, is free or reachable
``hccn``              ``hccn_tool``: NPU links, health and IPs (multi-node)
====================  ==========================================================
"""

from __future__ import annotations

from . import devices, hccl, hccn, launch_env, network, ranktable_checks, stack, sysctl
from .context import Context, Problem

# Order matters: later checks read what earlier ones found (the resolved spec, the
# ranktable, the NPU count).
CHECKS = (launch_env.check, devices.check, stack.check, ranktable_checks.check, hccl.check, sysctl.check,
          network.check, hccn.check)

__all__ = ["CHECKS", "Context", "Problem", "run_checks"]


def run_checks(ctx: Context) -> list[Problem]:
    """Run every check on ``ctx``; the problems found (also left in ``ctx.problems``)."""
    for check in CHECKS:
        check(ctx)
    return ctx.problems
