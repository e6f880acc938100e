"""Kernel settings the CANN cluster guide asks for, read from ``/proc/sys``.

- HCCL's 16 ports (``HCCL_IF_BASE_PORT``, default 60000-60015) must be reserved
  (``net.ipv4.ip_local_reserved_ports``) wherever they fall in the ephemeral range
  (``net.ipv4.ip_local_port_range``, 32768-60999 by default): any outgoing connection
  may otherwise take one first, and HCCL's bind fails. Checked for multi-node jobs,
  whose HCCL links go through these host ports.
- Every rank connects to the master at the start, at once: ``net.core.somaxconn``
  and ``net.ipv4.tcp_max_syn_backlog`` (listen and SYN queues) must hold the whole
  job, or connections are dropped and retried until timeouts fire.
"""

from __future__ import annotations

from .context import Context
from .hccl import PORTS, base_port

AREA = "sysctl"
LARGE = 65535  # the guide's value for large clusters
EPHEMERAL_DEFAULT = (32768, 60999)


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """``"8080,60000-60015"`` -> [(8080, 8080), (60000, 60015)] (the kernel's format)."""
    out = []
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        if low.strip().isdigit() and (not high or high.strip().isdigit()):
            out.append((int(low), int(high or low)))
    return out


def _format(ranges: list[tuple[int, int]]) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _ephemeral(ctx: Context) -> tuple[int, int]:
    """net.ipv4.ip_local_port_range ("32768\t60999"), the kernel's default when unreadable."""
    parts = (ctx.proc_sys("net.ipv4.ip_local_port_range") or "").split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return EPHEMERAL_DEFAULT


def check(ctx: Context) -> None:
    _hccl_ports(ctx)
    world = ctx.world_size
    if world is None:
        ctx.note("job size unknown: somaxconn and SYN backlog not checked")
        return
    for name in ("net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog"):
        raw = ctx.proc_sys(name)
        if raw is None or not raw.isdigit():
            ctx.note(f"{name} not readable")
            continue
        if int(raw) < world:
            ctx.problem(AREA, f"{name}={raw} is below the job's {world} processes, which all connect at start",
                        f"sysctl -w {name}={LARGE} (and in /etc/sysctl.conf)")


def _hccl_ports(ctx: Context) -> None:
    if not ctx.multi_node:
        ctx.note("single node: HCCL port reservation not needed")
        return
    base = base_port(ctx)
    if base is None:
        return
    reserved_text = ctx.proc_sys("net.ipv4.ip_local_reserved_ports")
    if reserved_text is None:
        ctx.note("net.ipv4.ip_local_reserved_ports not readable")
        return
    reserved = parse_ranges(reserved_text)
    hccl = range(base, base + PORTS)
    low, high = _ephemeral(ctx)
    exposed = [p for p in hccl if low <= p <= high and not any(a <= p <= b for a, b in reserved)]
    if exposed:
        want = _format([*reserved, (base, base + PORTS - 1)])
        ctx.problem(AREA, f"HCCL's ports {base}-{base + PORTS - 1} are not all reserved: {exposed[0]}-{exposed[-1]} "
                          f"lie in the ephemeral range {low}-{high} (net.ipv4.ip_local_port_range), where any "
                          f"outgoing connection can take them before HCCL binds",
                    f"sysctl -w net.ipv4.ip_local_reserved_ports={want} (and in /etc/sysctl.conf)")
