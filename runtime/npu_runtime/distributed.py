"""``init_distributed``: resolve the launcher, pick device and backend, start the group."""

from __future__ import annotations

import datetime as _dt
import logging
import os
import socket
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from . import devices, teardown
from . import env as _env
from .bounds import bounded_int, bounded_list
from .errors import LaunchError

log = logging.getLogger("npu_runtime")

HCCL_CONNECT_TIMEOUT_WITH_RANKTABLE = 300
HCCL_EXEC_TIMEOUT_DEFAULT = 1836  # HCCL's own default, seconds
PG_TIMEOUT_MARGIN_S = 36  # process-group timeout fires this much before HCCL's


@dataclass(frozen=True)
class DistInfo:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    device: Any  # torch.device
    backend: str
    source: str = _env.SINGLE

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _int_or_none(raw: str | None, name: str) -> int | None:
    """A bounded int, or None for anything unset or malformed (callers have a fallback)."""
    try:
        return bounded_int(raw, name)
    except LaunchError:
        return None


def default_host_ids(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Names and addresses of this host, to find it in a ranktable.

    NPU_RUNTIME_HOST_IP (comma-separated) replaces detection entirely.
    """
    environ = os.environ if environ is None else environ
    override = bounded_list(environ.get("NPU_RUNTIME_HOST_IP"), "NPU_RUNTIME_HOST_IP")  # LaunchError if too long
    if override:
        return override
    ids = {"127.0.0.1", "localhost"}
    for var in ("MA_CURRENT_IP", "POD_IP", "XDL_IP"):
        if environ.get(var):
            ids.add(environ[var])
    try:
        name = socket.gethostname()
        ids.add(name)
        for info in socket.getaddrinfo(name, None):
            ids.add(str(info[4][0]))
    except OSError:
        pass
    return sorted(ids)


def apply_hccl_defaults(environ: MutableMapping[str, str] | None = None, *,
                        ranktable_used: bool | None = None) -> dict[str, str]:
    """Fill HCCL variables that are unset; never override the user. Returns what was set."""
    environ = os.environ if environ is None else environ
    if ranktable_used is None:
        ranktable_used = bool(environ.get("RANK_TABLE_FILE"))
    changed: dict[str, str] = {}
    if ranktable_used:
        current = environ.get("HCCL_CONNECT_TIMEOUT")
        if current in (None, ""):
            environ["HCCL_CONNECT_TIMEOUT"] = changed["HCCL_CONNECT_TIMEOUT"] = str(HCCL_CONNECT_TIMEOUT_WITH_RANKTABLE)
        elif _int_or_none(current, "HCCL_CONNECT_TIMEOUT") is not None and \
                int(current) < HCCL_CONNECT_TIMEOUT_WITH_RANKTABLE:
            log.warning("npu_runtime: HCCL_CONNECT_TIMEOUT=%s is below %d s, which is short for ranktable jobs",
                        current, HCCL_CONNECT_TIMEOUT_WITH_RANKTABLE)
    return changed


def hccl_exec_timeout_s(environ: MutableMapping[str, str] | None = None) -> int | None:
    """HCCL_EXEC_TIMEOUT in seconds (HCCL's default if unset); None means 'no limit' (0)."""
    environ = os.environ if environ is None else environ
    raw = environ.get("HCCL_EXEC_TIMEOUT")
    if raw in (None, ""):
        return HCCL_EXEC_TIMEOUT_DEFAULT
    try:
        # HCCL's own range (0-2147483647, a multiple of 68 on Atlas training) is the
        # preflight's to report; here any bounded whole number is a timeout (the
        # watchdog clamps what it derives from it).
        value = bounded_int(raw, "HCCL_EXEC_TIMEOUT", minimum=0, maximum=10**12 - 1)
    except LaunchError as exc:
        raise LaunchError(f"{exc} (a whole number of seconds >= 0)") from None
    if value is None:
        raise LaunchError(f"HCCL_EXEC_TIMEOUT={raw!r} is not a whole number of seconds >= 0")
    return value or None


def pg_timeout_s(environ: MutableMapping[str, str] | None = None) -> float | None:
    """A process-group timeout just below HCCL_EXEC_TIMEOUT, so torch reports a hung
    collective (with its rank and op) before HCCL tears the device down."""
    exec_s = hccl_exec_timeout_s(environ)
    if exec_s is None:
        return None
    return float(exec_s - PG_TIMEOUT_MARGIN_S) if exec_s > 2 * PG_TIMEOUT_MARGIN_S else exec_s / 2.0


def _pick_device(device_type: str | None, spec: _env.LaunchSpec) -> tuple[Any, int | None]:
    import torch

    if device_type is None:
        return torch.device("cpu"), None
    count = devices.module_for(device_type).device_count()
    candidates = [("device id", spec.device_id), ("local rank", spec.local_rank)]
    for _what, idx in candidates:
        if idx is not None and 0 <= idx < count:
            return torch.device(device_type, idx), idx
    if count == 1:
        return torch.device(device_type, 0), 0
    raise LaunchError(
        f"local rank {spec.local_rank} (device id {spec.device_id}) has no {device_type} device: "
        f"only {count} visible"
    )


def set_device(spec: _env.LaunchSpec) -> Any | None:
    """Make this rank's accelerator device current (device id, else local rank); None on CPU."""
    device_type = devices.accelerator_type()
    if device_type is None:
        return None
    device, index = _pick_device(device_type, spec)
    if index is not None:
        devices.module_for(device_type).set_device(index)
    return device


def _attempt_store(spec: _env.LaunchSpec, environ: MutableMapping[str, str], timeout: Any) -> Any:
    """The rendezvous store, seen through a prefix of its own per torchrun attempt.

    Under ``torchrun --max-restarts`` the workers share the agent's store, and its keys
    outlive an attempt: a restarted group can read the previous attempt's addresses and
    connect to dead peers (pytorch/pytorch#135712, #167288; here, 5 of 8 restarted gloo
    groups failed so). Prefixing the keys with TORCHELASTIC_RESTART_COUNT (as torch once
    did itself) gives every attempt a clean namespace.
    """
    import datetime

    import torch.distributed as dist
    from torch.distributed.constants import default_pg_timeout

    host = spec.master_addr or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    wait = timeout if isinstance(timeout, datetime.timedelta) else default_pg_timeout
    store, _rank, _world = next(dist.rendezvous(f"tcp://{host}:{spec.master_port}", spec.rank, spec.world_size,
                                                timeout=wait))
    attempt = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"npu_runtime/attempt_{attempt}", store)


def _current_info() -> DistInfo:
    import torch
    import torch.distributed as dist

    local_rank = _int_or_none(os.environ.get("LOCAL_RANK"), "LOCAL_RANK") or 0
    lws = _int_or_none(os.environ.get("LOCAL_WORLD_SIZE"), "LOCAL_WORLD_SIZE")
    dt = devices.accelerator_type()
    device = torch.device(dt, devices.module_for(dt).current_device()) if dt else torch.device("cpu")
    return DistInfo(dist.get_rank(), local_rank, dist.get_world_size(),
                    lws or dist.get_world_size(), device,
                    str(dist.get_backend()), "existing")


def init_distributed(backend: str | None = None, *, local_rank: int | None = None,
                     timeout: float | _dt.timedelta | None = None,
                     ranktable_timeout_s: float | None = None,
                     environ: MutableMapping[str, str] | None = None) -> DistInfo:
    """Resolve the environment, set the device and initialise the default process group.

    If a group already exists its description is returned unchanged. ``local_rank`` is
    needed only on node-level launchers with several devices per node.
    """
    import torch.distributed as dist

    devices.import_torch_npu()
    if dist.is_available() and dist.is_initialized():
        return _current_info()
    environ = os.environ if environ is None else environ
    if ranktable_timeout_s is None:
        ranktable_timeout_s = _env.ranktable_timeout_s(environ)
    spec = _env.resolve(environ, local_rank=local_rank, host_ids=default_host_ids(environ),
                        ranktable_timeout_s=ranktable_timeout_s)
    if not spec.resolved:
        raise LaunchError(
            f"the {spec.source} environment describes a node with {spec.local_world_size} devices but not "
            f"which one this process drives: pass init_distributed(local_rank=...) or launch with torchrun"
        )
    apply_hccl_defaults(environ, ranktable_used=spec.ranktable is not None or bool(environ.get("RANK_TABLE_FILE")))
    device_type = devices.accelerator_type()
    backend = backend or environ.get("NPU_RUNTIME_BACKEND") or devices.backend_for(device_type)
    device, index = _pick_device(device_type, spec)
    if index is not None:
        devices.module_for(device_type).set_device(index)
    if timeout is None and backend == "hccl":
        secs = pg_timeout_s(environ)
        timeout = None if secs is None else _dt.timedelta(seconds=secs)
    elif isinstance(timeout, (int, float)):
        timeout = _dt.timedelta(seconds=timeout)
    kwargs: dict[str, Any] = {"backend": backend, "rank": spec.rank, "world_size": spec.world_size}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if spec.world_size == 1:
        kwargs["store"] = dist.HashStore()
    else:
        environ.update(_env.torchrun_env(spec))
        kwargs["store"] = _attempt_store(spec, environ, timeout)
    log.info("npu_runtime: rank %s/%s (local %s) from %s, backend %s, device %s",
             spec.rank, spec.world_size, spec.local_rank, spec.source, backend, device)
    teardown.before_group()
    dist.init_process_group(**kwargs)
    teardown.own_group(dist.group.WORLD)
    return DistInfo(spec.rank, spec.local_rank, spec.world_size, spec.local_world_size,  # type: ignore[arg-type]
                    device, backend, spec.source)
