"""The launch environment: every source ``init_distributed()`` reads, and whether they agree.

Two passes:

1. **Resolve** it the way the runtime will (``npu_runtime.env.resolve``): an error here
   is an error the job would stop on. Before a per-card ranktable launcher starts its
   processes (``RANK_ID`` not set yet, ``--node-rank``/``--cards`` given), every card
   it will start is resolved against the table.
2. **Agree**: each launcher variable, the launcher's own flags and the ranktable state
   the job's shape (world size, nodes, NPUs per node, node rank, master). Any two that
   differ describe two different jobs, which ends in a hang at the first collective.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from .. import env as _env
from .. import ranktable as _rt
from ..errors import LaunchError
from .context import Context

AREA = "launch env"

# quantity -> how to make the sources agree
_FIXES = {
    "world size": "launch nodes x NPUs per node processes, and make WORLD_SIZE / RANK_SIZE and the ranktable match",
    "node count": "start the job on as many nodes as every source says (regenerate launchers: npu-migrate launch --nodes N)",
    "NPUs per node": "use one NPU count per node everywhere (regenerate launchers: npu-migrate launch --cards N)",
    "node rank": "give this node the same index everywhere (NODE_RANK = VC_TASK_INDEX = its position in the ranktable)",
    "master address": "point every node at node 0's address (MASTER_ADDR = the first of VC_WORKER_HOSTS)",
    "master port": "use one MASTER_PORT for the whole job",
}


@dataclass(frozen=True)
class Claim:
    quantity: str
    source: str  # a variable, a flag or the ranktable
    value: object


def check(ctx: Context) -> None:
    table_error = _load_table(ctx)
    _resolve(ctx, table_error)
    _agree(ctx)
    _leftovers(ctx)
    _node_rank_given(ctx)
    _node_rank_in_range(ctx)


# Where a node's index can come from, besides --node-rank.
_NODE_RANK_SOURCES = ("NODE_RANK", "GROUP_RANK", "VC_TASK_INDEX", "RANK_ID")


def _node_rank_given(ctx: Context) -> None:
    """In a multi-node job every node needs its own index: a default of 0 makes two node 0s."""
    if not ctx.multi_node or ctx.node_rank is not None or ctx.local_server is not None:
        return
    env = ctx.environ
    if any(env.get(name, "").strip() for name in _NODE_RANK_SOURCES) or _env.is_local_rank_list(env.get("LOCAL_RANK")):
        return
    if _env.detect_source(env) == _env.TORCHRUN and env.get("RANK", "").strip():
        return  # a torchrun worker: its rank already places it
    ctx.problem(AREA, f"no node rank in a {ctx.job_nodes}-node job (no --node-rank, NODE_RANK, GROUP_RANK, "
                      "VC_TASK_INDEX or ranktable entry for this host): every node would start as node 0",
                "give each node its index: NODE_RANK=K bash launch/torchrun.sh (0 on the master)")


def _node_rank_in_range(ctx: Context) -> None:
    """A node index at or above the node count (NODE_RANK=2 in a 2-node job) names a node the
    job does not have: its ranks would lie beyond the world size, and the rendezvous waits
    for them until it times out."""
    nodes = ctx.job_nodes
    if nodes is None:
        return
    for claim in claims(ctx, report=False):
        if claim.quantity == "node rank" and not 0 <= int(claim.value) < nodes:
            ctx.problem(AREA, f"{claim.source} says this is node {claim.value}, but the job has {nodes} node(s) "
                              f"(0..{nodes - 1})", "give each node its index below the node count (0 on the master)")
            return


def _load_table(ctx: Context) -> str | None:
    path = ctx.environ.get("RANK_TABLE_FILE")
    if not path:
        return None
    try:
        ctx.table = _rt.load(path, timeout_s=ctx.ranktable_timeout_s)
    except LaunchError as exc:
        ctx.problem("ranktable", str(exc), _ranktable_fix(str(exc)))
        return str(exc)
    ctx.local_server = _rt.find_local_server(ctx.table, list(ctx.host_ids))
    return None


def _ranktable_fix(message: str) -> str:
    if "status" in message:
        return ("wait until the scheduler marks it completed (NPU_RUNTIME_RANKTABLE_TIMEOUT / "
                "--ranktable-timeout), or regenerate it")
    if "does not exist" in message:
        return "point RANK_TABLE_FILE at the job's ranktable (a JSON file, or the directory holding jobstart_hccl.json)"
    return "regenerate the ranktable (hccl_tools.py or the scheduler): every device once, rank_id 0..N-1"


def _resolve(ctx: Context, table_error: str | None) -> None:
    source = _env.detect_source(ctx.environ)
    if source == _env.RANKTABLE and table_error is not None:
        return  # the ranktable line says it all
    if source == _env.RANKTABLE and not ctx.environ.get("RANK_ID", "").strip():
        _resolve_cards(ctx)
        return
    try:
        # Missing device IPs are the ranktable check's line, with its own fix.
        ctx.spec = _env.resolve(ctx.environ, host_ids=ctx.host_ids, ranktable_timeout_s=ctx.ranktable_timeout_s,
                                require_device_ips=False)
    except LaunchError as exc:
        ctx.problem(AREA, str(exc), "correct the variable or file it names: init_distributed() stops on it too")
        return
    ctx.note(f"launch environment: {ctx.spec.source}")


def _resolve_cards(ctx: Context) -> None:
    """A per-card launcher about to start cards 0..C-1 of node K as ranks K*C+i on device i."""
    if ctx.node_rank is None or ctx.cards is None:
        ctx.note("ranktable: RANK_ID not set and no --node-rank/--cards, so no card was resolved")
        return
    for card in range(ctx.cards):
        rank = ctx.node_rank * ctx.cards + card
        environ = {**ctx.environ, "RANK_ID": str(rank), "DEVICE_ID": str(card), "ASCEND_DEVICE_ID": str(card)}
        try:
            spec = _env.resolve(environ, host_ids=ctx.host_ids, ranktable_timeout_s=ctx.ranktable_timeout_s,
                                require_device_ips=False)
        except LaunchError as exc:
            ctx.problem(AREA, f"card {card} of node {ctx.node_rank} would start as RANK_ID={rank}: {exc}",
                        "list this node's cards in the ranktable as rank_id NODE_RANK*cards+i on device_id i, "
                        "or correct NODE_RANK")
            return
        if ctx.spec is None:
            ctx.spec = spec
    ctx.note(f"ranktable: cards 0..{ctx.cards - 1} of node {ctx.node_rank} resolve against the table")


def _int_claim(ctx: Context, name: str, quantity: str, report: bool = True) -> Iterator[Claim]:
    raw = ctx.environ.get(name)
    if raw is None or not raw.strip():
        return
    try:
        yield Claim(quantity, name, int(raw.strip()))
    except ValueError:
        if report:
            ctx.problem(AREA, f"{name}={raw!r} is not an integer", f"set {name} to a whole number or unset it")


def claims(ctx: Context, report: bool = True) -> list[Claim]:
    """What every source says about the job's shape; ``report``: a non-integer is a problem line."""
    env = ctx.environ
    out: list[Claim] = []
    for flag, quantity, value in (("--nodes", "node count", ctx.nodes), ("--cards", "NPUs per node", ctx.cards),
                                  ("--node-rank", "node rank", ctx.node_rank)):
        if value is not None:
            out.append(Claim(quantity, flag, value))
    if ctx.nodes is not None and ctx.cards is not None:
        out.append(Claim("world size", "--nodes x --cards", ctx.nodes * ctx.cards))
    if ctx.master is not None:
        out += [Claim("master address", "--master", ctx.master[0]), Claim("master port", "--master", ctx.master[1])]
    for name, quantity in (("WORLD_SIZE", "world size"), ("RANK_SIZE", "world size"),
                           ("LOCAL_WORLD_SIZE", "NPUs per node"), ("MA_NUM_GPUS", "NPUs per node"),
                           ("MA_NUM_HOSTS", "node count"), ("VC_WORKER_NUM", "node count"),
                           ("NODE_RANK", "node rank"), ("VC_TASK_INDEX", "node rank"), ("GROUP_RANK", "node rank"),
                           ("MASTER_PORT", "master port")):
        out += _int_claim(ctx, name, quantity, report)
    local_rank = env.get("LOCAL_RANK")
    if _env.is_local_rank_list(local_rank):  # Ascend Operator: RANK is the node rank
        out.append(Claim("NPUs per node", "LOCAL_RANK", len(_env.parse_local_rank_list(local_rank))))
        out += _int_claim(ctx, "RANK", "node rank", report)
    if env.get("MASTER_ADDR"):
        out.append(Claim("master address", "MASTER_ADDR", env["MASTER_ADDR"]))
    hosts = [h.strip() for h in env.get("VC_WORKER_HOSTS", "").split(",") if h.strip()]
    if hosts:
        out += [Claim("node count", "VC_WORKER_HOSTS", len(hosts)), Claim("master address", "VC_WORKER_HOSTS", hosts[0])]
    table = ctx.table
    if table is not None:
        where = f"ranktable {table.path}"
        out += [Claim("world size", where, table.world_size), Claim("node count", where, len(table.servers()))]
        if ctx.local_server is not None:
            out += [Claim("NPUs per node", where, len(table.server_devices(ctx.local_server))),
                    Claim("node rank", where, ctx.local_server)]
    return out


def _agree(ctx: Context) -> None:
    by_quantity: dict[str, list[Claim]] = {}
    for claim in claims(ctx):
        by_quantity.setdefault(claim.quantity, []).append(claim)
    reported = " ".join(p.message for p in ctx.problems)
    for quantity, group in by_quantity.items():
        same = _same_address if quantity == "master address" else (lambda a, b: a == b)
        if all(same(group[0].value, c.value) for c in group[1:]):
            continue
        majority = Counter(str(c.value) for c in group).most_common(1)[0][0]
        if all(c.source.split()[0] in reported for c in group if str(c.value) != majority):
            continue  # the resolver already named the odd ones out
        stated = ", ".join(f"{c.source} says {c.value}" for c in group)
        ctx.problem(AREA, f"the sources disagree on the {quantity}: {stated}", _FIXES[quantity])


def _addresses(host: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        return {host}


def _same_address(a: object, b: object) -> bool:
    return a == b or bool(_addresses(str(a)) & _addresses(str(b)))


def _leftovers(ctx: Context) -> None:
    env = ctx.environ
    if env.get("CUDA_VISIBLE_DEVICES") is not None and env.get("ASCEND_RT_VISIBLE_DEVICES") is None:
        ctx.problem(AREA, f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r} is set, but NPUs ignore it",
                    "use ASCEND_RT_VISIBLE_DEVICES for the same selection (and unset CUDA_VISIBLE_DEVICES)")
    visible = env.get("ASCEND_RT_VISIBLE_DEVICES")
    cards = ctx.job_cards
    if visible is not None and cards is not None:
        count = len([v for v in visible.split(",") if v.strip()])
        if count < cards:
            ctx.problem(AREA, f"ASCEND_RT_VISIBLE_DEVICES={visible!r} shows {count} NPU(s) but the job starts "
                              f"{cards} process(es) per node (one NPU each)",
                        "list as many NPUs in ASCEND_RT_VISIBLE_DEVICES as processes per node, or unset it")
    a, b = env.get("ASCEND_DEVICE_ID"), env.get("DEVICE_ID")
    if a and b and a.strip() != b.strip():
        ctx.problem(AREA, f"ASCEND_DEVICE_ID={a!r} and DEVICE_ID={b!r} name different NPUs "
                          "(ASCEND_DEVICE_ID wins)", "set both to the same id, or unset DEVICE_ID")
