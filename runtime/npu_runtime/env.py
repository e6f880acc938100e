"""Work out rank, world size and rendezvous address from a launcher's environment.

Pure functions over a mapping (``os.environ`` by default) so each launcher can be
unit-tested with a synthetic environment. Sources are tried in this order:

1. torchrun / torch.distributed.run: RANK, WORLD_SIZE, LOCAL_RANK (an integer),
   LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
2. Ascend Operator (Volcano): RANK is the *node* rank and LOCAL_RANK a list string such
   as ``{0,1,2,3}``; WORLD_SIZE is the total number of processes.
3. Per-card ranktable mode: RANK_TABLE_FILE, RANK_ID, RANK_SIZE, ASCEND_DEVICE_ID
   (or the older DEVICE_ID).
4. ModelArts: MA_NUM_HOSTS, VC_TASK_INDEX, MA_NUM_GPUS, VC_WORKER_HOSTS (a plain
   Volcano Job's env and svc plugins: VC_TASK_INDEX, VC_WORKER_NUM, VC_WORKER_HOSTS).
5. A single process.

Node-level launchers (2 and 4) start one process per node. When a node has more than
one device, that process cannot know which local slot it is; pass ``local_rank=`` (for
example from ``torch.multiprocessing.spawn``) or launch torchrun inside the node.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import ranktable as _rt
from .bounds import MAX_DIGITS, MAX_INT, MAX_LIST, bounded_int, bounded_list
from .errors import LaunchError

log = logging.getLogger("npu_runtime")

TORCHRUN = "torchrun"
ASCEND_OPERATOR = "ascend-operator"
RANKTABLE = "ranktable"
MODELARTS = "modelarts"
SINGLE = "single"

DEFAULT_MASTER_PORT = 29500  # torch's own default; used where a launcher gives none
ASCEND_OPERATOR_DEFAULT_PORT = 2222
RANKTABLE_TIMEOUT_VAR = "NPU_RUNTIME_RANKTABLE_TIMEOUT"
RANKTABLE_TIMEOUT_DEFAULT_S = 300.0

_LIST_RE = re.compile(r"^\s*[\{\[]\s*([0-9]+(\s*,\s*[0-9]+)*)?\s*[\}\]]\s*$")


@dataclass(frozen=True)
class LaunchSpec:
    """What the environment says about this process. ``rank``/``local_rank`` are None
    when a node-level launcher cannot tell this process's slot."""

    source: str
    rank: int | None
    local_rank: int | None
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str | None
    master_port: int | None
    device_id: int | None = None
    ranktable: str | None = None

    @property
    def resolved(self) -> bool:
        return self.rank is not None and self.local_rank is not None


def _get_int(env: Mapping[str, str], name: str, source: str, *, default: int | None = None,
             minimum: int = 0, maximum: int = MAX_INT) -> int | None:
    value = bounded_int(env.get(name), name, minimum=minimum, maximum=maximum, where=f"{source} environment")
    return default if value is None else value


def _require_int(env: Mapping[str, str], name: str, source: str, minimum: int = 0) -> int:
    value = _get_int(env, name, source, minimum=minimum)
    if value is None:
        raise LaunchError(f"{name} is not set but is required in the {source} environment")
    return value


def _port(env: Mapping[str, str], source: str, default: int | None) -> int | None:
    return _get_int(env, "MASTER_PORT", source, default=default, minimum=1, maximum=65535)


def _check_rank(rank: int, world: int, rank_name: str, world_name: str, source: str) -> None:
    if rank >= world:
        raise LaunchError(f"{rank_name}={rank} is not below {world_name}={world} ({source} environment)")


def _need_master(addr: str | None, world: int, source: str, hint: str = "MASTER_ADDR") -> None:
    if world > 1 and not addr:
        raise LaunchError(f"{hint} is not set but world size is {world} ({source} environment)")


def ranktable_timeout_s(env: Mapping[str, str]) -> float:
    """NPU_RUNTIME_RANKTABLE_TIMEOUT in seconds (300 when unset)."""
    raw = env.get(RANKTABLE_TIMEOUT_VAR)
    if raw is None or not raw.strip():
        return RANKTABLE_TIMEOUT_DEFAULT_S
    if len(raw) > 64:
        raise LaunchError(f"{RANKTABLE_TIMEOUT_VAR} ({len(raw)} characters) is not a number of seconds")
    try:
        value = float(raw)
    except ValueError:
        raise LaunchError(f"{RANKTABLE_TIMEOUT_VAR}={raw!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise LaunchError(f"{RANKTABLE_TIMEOUT_VAR}={raw!r} must be a number of seconds >= 0")
    return value


#: a LOCAL_RANK list names the devices of one node: a few characters each
_LIST_MAX_CHARS = 4096


def is_local_rank_list(value: str | None) -> bool:
    return value is not None and len(value) <= _LIST_MAX_CHARS and bool(_LIST_RE.match(value))


def parse_local_rank_list(value: str) -> list[int]:
    inner = value.strip()[1:-1].strip()
    items = bounded_list(inner, "LOCAL_RANK", max_items=MAX_LIST, max_item=MAX_DIGITS)
    return [bounded_int(x, "LOCAL_RANK", where="Ascend Operator environment") or 0 for x in items]


def detect_source(env: Mapping[str, str]) -> str:
    """Which launcher's variables are present (no validation)."""
    if is_local_rank_list(env.get("LOCAL_RANK")):
        return ASCEND_OPERATOR
    if "RANK" in env or "TORCHELASTIC_RUN_ID" in env:
        return TORCHRUN
    if env.get("RANK_TABLE_FILE") and ("RANK_ID" in env or "RANK_SIZE" in env):
        return RANKTABLE
    if "VC_TASK_INDEX" in env or "MA_NUM_HOSTS" in env:
        return MODELARTS
    return SINGLE


def resolve(env: Mapping[str, str], *, local_rank: int | None = None,
            host_ids: Sequence[str] = (), ranktable_timeout_s: float = 300.0,
            require_device_ips: bool = True) -> LaunchSpec:
    """Resolve the launch environment into a LaunchSpec, or raise LaunchError.

    ``local_rank`` supplies the slot on node-level launchers; ``host_ids`` are the names
    and addresses of this machine (used to check that a ranktable lists it).
    ``require_device_ips=False`` leaves a multi-server ranktable without device IPs to a
    caller that reports it itself (the preflight).
    """
    source = detect_source(env)
    if source == TORCHRUN:
        return _torchrun(env)
    if source == ASCEND_OPERATOR:
        return _ascend_operator(env, local_rank)
    if source == RANKTABLE:
        return _ranktable(env, host_ids, ranktable_timeout_s, require_device_ips)
    if source == MODELARTS:
        return _modelarts(env, local_rank)
    return LaunchSpec(SINGLE, 0, 0, 1, 1, 0, env.get("MASTER_ADDR") or None, _port(env, SINGLE, None))


def _torchrun(env: Mapping[str, str]) -> LaunchSpec:
    src = "torchrun"
    rank = _require_int(env, "RANK", src)
    world = _require_int(env, "WORLD_SIZE", src, minimum=1)
    _check_rank(rank, world, "RANK", "WORLD_SIZE", src)
    lws = _get_int(env, "LOCAL_WORLD_SIZE", src, minimum=1)
    local = _get_int(env, "LOCAL_RANK", src)
    if local is None:
        # Hand-written launches often set only RANK/WORLD_SIZE: assume one node.
        local = rank % lws if lws else rank
    if lws is None:
        lws = world
    _check_rank(local, lws, "LOCAL_RANK", "LOCAL_WORLD_SIZE", src)
    if lws > world:
        raise LaunchError(f"LOCAL_WORLD_SIZE={lws} exceeds WORLD_SIZE={world} ({src} environment)")
    node = _get_int(env, "GROUP_RANK", src, default=rank // lws)
    addr = env.get("MASTER_ADDR") or None
    _need_master(addr, world, src)
    port = _port(env, src, None)
    if world > 1 and port is None:
        raise LaunchError(f"MASTER_PORT is not set but world size is {world} ({src} environment)")
    return LaunchSpec(TORCHRUN, rank, local, world, lws, node, addr, port)  # type: ignore[arg-type]


def _ascend_operator(env: Mapping[str, str], local_rank: int | None) -> LaunchSpec:
    src = "Ascend Operator"
    node = _require_int(env, "RANK", src)
    world = _require_int(env, "WORLD_SIZE", src, minimum=1)
    slots = parse_local_rank_list(env["LOCAL_RANK"])
    if not slots:
        raise LaunchError(f"LOCAL_RANK={env['LOCAL_RANK']!r} lists no devices ({src} environment)")
    lws = _get_int(env, "LOCAL_WORLD_SIZE", src, default=len(slots), minimum=1)
    if lws != len(slots):
        raise LaunchError(
            f"LOCAL_WORLD_SIZE={lws} but LOCAL_RANK={env['LOCAL_RANK']!r} lists {len(slots)} devices ({src} environment)"
        )
    if (node + 1) * lws > world:
        raise LaunchError(
            f"RANK={node} (node rank) with {lws} devices per node does not fit WORLD_SIZE={world} ({src} environment)"
        )
    addr = env.get("MASTER_ADDR") or None
    _need_master(addr, world, src)
    port = _port(env, src, ASCEND_OPERATOR_DEFAULT_PORT)
    if local_rank is None and lws == 1:
        local_rank = 0
    if local_rank is None:
        return LaunchSpec(ASCEND_OPERATOR, None, None, world, lws, node, addr, port)
    if not 0 <= local_rank < lws:
        raise LaunchError(f"local_rank={local_rank} is not below LOCAL_WORLD_SIZE={lws} ({src} environment)")
    return LaunchSpec(ASCEND_OPERATOR, node * lws + local_rank, local_rank, world, lws, node, addr, port,
                      device_id=slots[local_rank])


def _ranktable(env: Mapping[str, str], host_ids: Sequence[str], timeout_s: float,
               require_device_ips: bool = True) -> LaunchSpec:
    src = "ranktable"
    path = env["RANK_TABLE_FILE"]
    rank = _require_int(env, "RANK_ID", src)
    world = _require_int(env, "RANK_SIZE", src, minimum=1)
    _check_rank(rank, world, "RANK_ID", "RANK_SIZE", src)
    dev_var = "ASCEND_DEVICE_ID" if env.get("ASCEND_DEVICE_ID") not in (None, "") else "DEVICE_ID"
    device_id = _get_int(env, dev_var, src)
    table = _rt.load(path, timeout_s=timeout_s)
    if require_device_ips:
        _check_device_ips(table)
    if table.world_size != world:
        raise LaunchError(
            f"RANK_SIZE={world} but ranktable {table.path} lists {table.world_size} devices"
        )
    entry = table.devices[rank]
    ids = set(host_ids)
    if ids:
        local_server = _rt.find_local_server(table, list(ids))
        if local_server is None:
            listed = ", ".join(sid if ip is None else f"{sid} ({ip})" for sid, ip in table.servers())
            raise LaunchError(
                f"ranktable {table.path}: no server_id/host_ip matches this host "
                f"(tried {sorted(ids)}; listed: {listed}); set NPU_RUNTIME_HOST_IP if the names differ"
            )
        if not (entry.server_id in ids or (entry.host_ip is not None and entry.host_ip in ids)):
            raise LaunchError(
                f"RANK_ID={rank} is on server {entry.server_id} in ranktable {table.path}, not on this host"
            )
    if device_id is not None and device_id != entry.device_id:
        raise LaunchError(
            f"{dev_var}={device_id} but ranktable {table.path} gives device_id {entry.device_id} to RANK_ID={rank}"
        )
    on_server = table.server_devices(entry.server_index)
    local = [d.rank for d in on_server].index(rank)
    addr = env.get("MASTER_ADDR") or table.master_addr()
    port = _port(env, src, DEFAULT_MASTER_PORT)
    return LaunchSpec(RANKTABLE, rank, local, world, len(on_server), entry.server_index, addr, port,
                      device_id=entry.device_id, ranktable=table.path)


def _check_device_ips(table: _rt.Ranktable) -> None:
    """HCCL reaches devices on other servers through device_ip (RoCE): required when the
    table has several servers; on one server a missing one is only logged."""
    missing = table.without_device_ip()
    if not missing:
        return
    d = missing[0]
    what = f"rank_id {d.rank} (server {d.server_id}, device {d.device_id}) has no device_ip"
    if len(table.servers()) > 1:
        raise LaunchError(f"ranktable {table.path}: {what}, which HCCL needs between servers")
    log.warning("npu_runtime: ranktable %s: %s", table.path, what)


def _modelarts(env: Mapping[str, str], local_rank: int | None) -> LaunchSpec:
    src = "ModelArts"
    worker_hosts = [h.strip() for h in env.get("VC_WORKER_HOSTS", "").split(",") if h.strip()]
    hosts_var = "MA_NUM_HOSTS" if env.get("MA_NUM_HOSTS", "").strip() else "VC_WORKER_NUM"
    # A plain Volcano Job (env and svc plugins) sets VC_TASK_INDEX, VC_WORKER_NUM and
    # VC_WORKER_HOSTS but not MA_NUM_HOSTS.
    hosts = _get_int(env, hosts_var, src, default=len(worker_hosts) or 1, minimum=1)
    task = _get_int(env, "VC_TASK_INDEX", src, default=0)
    assert hosts is not None and task is not None
    _check_rank(task, hosts, "VC_TASK_INDEX", hosts_var, src)
    per_node = max(1, _get_int(env, "MA_NUM_GPUS", src, default=1) or 1)
    if worker_hosts:
        if len(worker_hosts) != hosts:
            raise LaunchError(
                f"VC_WORKER_HOSTS lists {len(worker_hosts)} hosts but {hosts_var}={hosts} ({src} environment)"
            )
        addr: str | None = worker_hosts[0]
    elif hosts > 1:
        raise LaunchError(f"VC_WORKER_HOSTS is not set but {hosts_var}={hosts} ({src} environment)")
    else:
        addr = env.get("MASTER_ADDR") or "127.0.0.1"
    port = _port(env, src, DEFAULT_MASTER_PORT)
    world = hosts * per_node
    if local_rank is None and per_node == 1:
        local_rank = 0
    if local_rank is None:
        return LaunchSpec(MODELARTS, None, None, world, per_node, task, addr, port)
    if not 0 <= local_rank < per_node:
        raise LaunchError(f"local_rank={local_rank} is not below MA_NUM_GPUS={per_node} ({src} environment)")
    return LaunchSpec(MODELARTS, task * per_node + local_rank, local_rank, world, per_node, task, addr, port)


def torchrun_env(spec: LaunchSpec) -> dict[str, str]:
    """The torchrun variables equivalent to ``spec`` (empty if the slot is unknown)."""
    if not spec.resolved:
        return {}
    out = {
        "RANK": str(spec.rank),
        "LOCAL_RANK": str(spec.local_rank),
        "WORLD_SIZE": str(spec.world_size),
        "LOCAL_WORLD_SIZE": str(spec.local_world_size),
        "GROUP_RANK": str(spec.node_rank),
    }
    if spec.master_addr:
        out["MASTER_ADDR"] = spec.master_addr
    if spec.master_port is not None:
        out["MASTER_PORT"] = str(spec.master_port)
    return out

