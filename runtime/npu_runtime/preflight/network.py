"""The rendezvous: ``MASTER_ADDR:MASTER_PORT``, where node 0's launcher listens.

- The name resolves (retried for ``--master-wait`` seconds: a Volcano pod's DNS name
  appears shortly after the pod starts).
- On the master (the address is this host's) the node must be node 0, and before the
  launcher starts the port must be free.
- Elsewhere node 0 must be reachable: a TCP connection is answered, accepted or
  refused (nothing listens yet), within the wait. A timeout or "no route" means a
  firewall, a wrong address or a wrong network.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import time

from .. import env as _env
from .context import Context

AREA = "rendezvous"
ATTEMPT_S = 3.0


def _master(ctx: Context) -> tuple[str, int] | None:
    if ctx.master is not None:
        return ctx.master
    spec = ctx.spec
    addr = ctx.environ.get("MASTER_ADDR") or (spec.master_addr if spec is not None else None)
    raw = ctx.environ.get("MASTER_PORT", "").strip()
    port = int(raw) if raw.isdigit() else (spec.master_port if spec is not None else None)
    return (addr, port) if addr and port else None


def _resolve(host: str, deadline: float) -> tuple[list[tuple], str | None]:
    while True:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            return [(info[0], info[4][0]) for info in infos], None
        except (OSError, UnicodeError) as exc:
            error = str(exc)
        if time.monotonic() >= deadline:
            return [], error
        time.sleep(1.0)


def _is_local(family: int, ip: str) -> bool:
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((ip, 0))
        return True
    except OSError:
        return False


def _port_free(port: int) -> str | None:
    """None if a listener could bind ``port`` on every interface (as torch's store does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _reach(family: int, ip: str, port: int, deadline: float) -> str | None:
    """None if the host answers on ``port`` (accepts or refuses) before the deadline."""
    while True:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(max(0.2, min(ATTEMPT_S, deadline - time.monotonic())))
            try:
                s.connect((ip, port))
                return None
            except ConnectionRefusedError:
                return None
            except TimeoutError:
                error = "timed out"
            except OSError as exc:
                if exc.errno == errno.ECONNREFUSED:
                    return None
                error = exc.strerror or str(exc)
        if time.monotonic() >= deadline:
            return error
        time.sleep(0.5)


def check(ctx: Context) -> None:
    master = _master(ctx)
    world = ctx.world_size
    if master is None or (world is not None and world <= 1):
        ctx.note("no rendezvous to check (single process, or no MASTER_ADDR/MASTER_PORT)")
        return
    host, port = master
    deadline = time.monotonic() + ctx.master_wait_s
    addresses, error = _resolve(host, deadline)
    if not addresses:
        ctx.problem(AREA, f"MASTER_ADDR {host} does not resolve ({error})",
                    "use node 0's IP address, or a name every node resolves (check /etc/hosts and DNS)")
        return
    if ctx.multi_node and all(ipaddress.ip_address(ip.split("%")[0]).is_loopback for _f, ip in addresses):
        ctx.problem(AREA, f"MASTER_ADDR {host} is a loopback address in a {ctx.job_nodes}-node job: the other "
                          "nodes cannot reach it", "set MASTER_ADDR to node 0's address on the network between nodes")
        return
    if not ctx.node_index_valid:
        ctx.note("rendezvous not checked: this node's index is not one of the job's nodes")
        return
    node_rank = ctx.node_index
    started = _env.detect_source(ctx.environ) == _env.TORCHRUN  # inside a worker: the store is up
    if any(_is_local(family, ip) for family, ip in addresses):
        if node_rank not in (None, 0):
            ctx.problem(AREA, f"MASTER_ADDR {host} is this host, but this is node {node_rank}",
                        "run node 0 on the master address, or point MASTER_ADDR at node 0")
        elif not started:
            busy = _port_free(port)
            if busy is not None:
                ctx.problem(AREA, f"MASTER_PORT {port} on this host (the master) is taken: {busy}",
                            f"choose another MASTER_PORT, or stop what holds it (ss -ltnp 'sport = :{port}')")
        return
    if node_rank == 0:
        ctx.problem(AREA, f"this is node 0, which hosts the rendezvous, but MASTER_ADDR {host} "
                          f"({', '.join(ip for _f, ip in addresses)}) is not an address of this host",
                    "set MASTER_ADDR to this node's address on every node")
        return
    family, ip = addresses[0]
    error = _reach(family, ip, port, deadline)
    if error is not None:
        ctx.problem(AREA, f"cannot reach MASTER_ADDR {host}:{port} ({ip}): {error}",
                    f"open TCP port {port} on node 0 to the other nodes (firewall, security group), "
                    "or correct MASTER_ADDR")
    else:
        ctx.note(f"rendezvous {host}:{port} answers")
