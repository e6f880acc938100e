"""HCCL's variables: the link-setup timeout (with a ranktable above all), the
collective timeout, and the 16 ports from ``HCCL_IF_BASE_PORT``."""

from __future__ import annotations

from ..distributed import HCCL_CONNECT_TIMEOUT_WITH_RANKTABLE, hccl_exec_timeout_s
from ..errors import LaunchError
from .context import Context

AREA = "hccl"
CONNECT_RANGE = (120, 7200)  # HCCL_CONNECT_TIMEOUT, seconds
EXEC_MAX = 2147483647  # HCCL_EXEC_TIMEOUT on Atlas A2/A3 (0 = no limit)
EXEC_STEP, EXEC_MAX_ATLAS = 68, 17340  # Atlas training series: a multiple of 68, at most 17340
ATLAS_TRAINING = "ascend-910"  # ring-controller.atlas of the Atlas training series (910A)
DEFAULT_BASE_PORT = 60000
PORTS = 16


def base_port(ctx: Context) -> int | None:
    """HCCL_IF_BASE_PORT (60000 when unset), or None when it is unusable (reported)."""
    raw = ctx.environ.get("HCCL_IF_BASE_PORT", "").strip()
    if not raw:
        return DEFAULT_BASE_PORT
    if not raw.isdigit() or not 1024 <= int(raw) <= 65536 - PORTS:
        ctx.problem(AREA, f"HCCL_IF_BASE_PORT={raw!r} is not a port from which 16 ports fit (1024..{65536 - PORTS})",
                    "unset it (HCCL uses 60000-60015) or give a free base port")
        return None
    return int(raw)


def check(ctx: Context) -> None:
    ranktable = bool(ctx.environ.get("RANK_TABLE_FILE"))
    raw = ctx.environ.get("HCCL_CONNECT_TIMEOUT", "").strip()
    low, high = CONNECT_RANGE
    floor = HCCL_CONNECT_TIMEOUT_WITH_RANKTABLE
    if raw and not (raw.isascii() and raw.isdigit()):
        ctx.problem(AREA, f"HCCL_CONNECT_TIMEOUT={raw!r} is not a whole number of seconds (HCCL's range {low}-{high})",
                    f"export HCCL_CONNECT_TIMEOUT=1200 (any whole number of seconds in {low}-{high})")
    elif raw and not low <= int(raw) <= high:
        ctx.problem(AREA, f"HCCL_CONNECT_TIMEOUT={raw!r} is outside HCCL's range {low}-{high} s",
                    f"export HCCL_CONNECT_TIMEOUT=1200 (any whole number of seconds in {low}-{high})")
    elif ranktable and (not raw or int(raw) < floor):
        now = f"HCCL_CONNECT_TIMEOUT={raw}" if raw else f"HCCL_CONNECT_TIMEOUT is unset (HCCL waits {low} s)"
        ctx.problem(AREA, f"{now} with a ranktable: links to every rank in the table must be set up in that time "
                          f"(torch_npu warns below {floor} s)",
                    f"export HCCL_CONNECT_TIMEOUT=1200 (at least {floor})")
    try:
        hccl_exec_timeout_s(dict(ctx.environ))
    except LaunchError as exc:
        ctx.problem(AREA, str(exc), "export HCCL_EXEC_TIMEOUT=1836 (HCCL's default; 0 means no limit)")
    else:
        _exec_range(ctx)
    base = base_port(ctx)
    port = _master_port(ctx)
    if base is not None and port is not None and base <= port < base + PORTS:
        ctx.problem(AREA, f"MASTER_PORT {port} is one of HCCL's ports {base}-{base + PORTS - 1} (HCCL_IF_BASE_PORT)",
                    "choose a MASTER_PORT outside that range (29500 is torch's default)")


def _exec_range(ctx: Context) -> None:
    raw = ctx.environ.get("HCCL_EXEC_TIMEOUT", "").strip()
    if not raw:
        return
    value = int(raw)
    if ctx.accelerator == ATLAS_TRAINING:
        if value % EXEC_STEP or not EXEC_STEP <= value <= EXEC_MAX_ATLAS:
            ctx.problem(AREA, f"HCCL_EXEC_TIMEOUT={raw} on an Atlas training server (ascend-910) must be a multiple "
                              f"of {EXEC_STEP} from {EXEC_STEP} to {EXEC_MAX_ATLAS} s",
                        f"export HCCL_EXEC_TIMEOUT={min(max(EXEC_STEP, -(-value // EXEC_STEP) * EXEC_STEP), EXEC_MAX_ATLAS)}")
    elif value > EXEC_MAX:
        ctx.problem(AREA, f"HCCL_EXEC_TIMEOUT={raw} is above HCCL's range 0-{EXEC_MAX} s",
                    "export HCCL_EXEC_TIMEOUT=1836 (HCCL's default; 0 means no limit)")


def _master_port(ctx: Context) -> int | None:
    if ctx.master is not None:
        return ctx.master[1]
    raw = ctx.environ.get("MASTER_PORT", "").strip()
    return int(raw) if raw.isdigit() else None
