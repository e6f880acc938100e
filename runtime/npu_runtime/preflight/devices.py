"""The node's NPUs: how many the job wants per server, and (where ``npu-smi`` exists)
how many the node has and whether each is healthy.

``npu-smi info -l`` prints ``Total Count : N`` and, per NPU, ``NPU ID : i`` and
``Chip Count : k`` (logical devices = the chips); ``npu-smi info -t health -i i``
prints ``Health Status : OK`` for a healthy NPU.
"""

from __future__ import annotations

import itertools
import re

from .context import Context

AREA = "npus"
ATLAS_CARDS = (1, 2, 4, 8)

_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*$")


def allowed_cards(ranktable_version: str | None = None, device_count: int | None = None) -> tuple[int, ...]:
    """NPUs per server an Atlas training server takes; 16 on a 16-NPU server: one whose
    npu-smi lists 16 (Atlas 200T A2 Box16, whose operator-made tables are version 1.0), or
    an A3 SuperPoD server (ranktable version 1.2)."""
    sixteen = (ranktable_version or "").startswith("1.2") or (device_count or 0) >= 16
    return (*ATLAS_CARDS, 16) if sixteen else ATLAS_CARDS


def cards_rule(ranktable_version: str | None = None, device_count: int | None = None) -> str:
    allowed = allowed_cards(ranktable_version, device_count)
    return f"Atlas training servers take {', '.join(map(str, allowed))} NPUs per server"


def _cards_rule(ctx: Context, cards: int | None, count: int | None) -> None:
    """1, 2, 4 or 8 per server; 16 where the node has 16 NPUs (Atlas 200T A2 Box16, Atlas A3)."""
    if ctx.table is not None or cards is None:
        return
    allowed = (*ATLAS_CARDS, 16) if count is not None and count >= 16 else ATLAS_CARDS
    if cards not in allowed:
        ctx.problem(AREA, f"{cards} processes (NPUs) per node; {cards_rule()} (16 on a 16-NPU server)",
                    f"use {', '.join(map(str, ATLAS_CARDS))} NPUs per node (npu-migrate launch --cards N)")


def _visible(ctx: Context, count: int | None) -> None:
    """ASCEND_RT_VISIBLE_DEVICES: whole numbers, ascending, each an NPU of the node; anything
    else makes torch_npu see no NPU or silently drop some."""
    raw = ctx.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if raw is None or not raw.strip():
        return
    parts = [p.strip() for p in raw.split(",")]
    fix = "list NPU ids in ascending order, each once, e.g. ASCEND_RT_VISIBLE_DEVICES=0,1,2,3 (npu-smi info -l)"
    if not all(p.isascii() and p.isdigit() for p in parts):
        ctx.problem(AREA, f"ASCEND_RT_VISIBLE_DEVICES={raw!r} is not a comma-separated list of NPU ids", fix)
        return
    ids = [int(p) for p in parts]
    if any(b <= a for a, b in itertools.pairwise(ids)):
        ctx.problem(AREA, f"ASCEND_RT_VISIBLE_DEVICES={raw!r} is not ascending (or repeats an id): torch_npu then "
                          "hides NPUs or sees none", fix)
    elif count is not None and ids[-1] >= count:
        ctx.problem(AREA, f"ASCEND_RT_VISIBLE_DEVICES={raw!r} names NPU {ids[-1]}, but npu-smi lists {count} "
                          f"(0..{count - 1})", fix)


def _fields(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(_FIELD.match, text.splitlines()) if m]


def _davinci(ctx: Context) -> list[str]:
    try:
        return sorted(p.name for p in ctx.dev_root.glob("davinci[0-9]*"))
    except OSError:
        return []


def check(ctx: Context) -> None:
    cards = ctx.job_cards
    tool = ctx.find_tool("npu-smi")
    if tool is None:
        devices = _davinci(ctx)
        ctx.found["NPUs"] = f"{len(devices)} device file(s)" if devices else "none"
        if devices:
            ctx.problem(AREA, f"npu-smi not found (PATH, /usr/local/Ascend/driver/tools), though "
                              f"{ctx.dev_root}/{devices[0]} exists: NPU count and health cannot be checked",
                        "install the driver's tools, or mount /usr/local/bin/npu-smi into the container")
        else:
            ctx.problem(AREA, f"no NPU on this node: no npu-smi and no {ctx.dev_root}/davinci<N> device",
                        "run on an Ascend node with its driver installed (or give the container its NPUs: "
                        "Ascend Docker Runtime, or the device plugin's huawei.com/Ascend910 resource)")
        _cards_rule(ctx, cards, None)
        _visible(ctx, None)
        return
    status, text = ctx.run_tool([tool, "info", "-l"])
    if status != 0:
        ctx.problem(AREA, f"`npu-smi info -l` failed (exit {status}): {_first_line(text)}",
                    "check the Ascend driver (npu-smi info; dmesg) before starting the job")
        return
    fields = _fields(text)
    npu_ids = [int(v) for k, v in fields if k == "NPU ID" and v.isdigit()]
    chips = [int(v) for k, v in fields if k == "Chip Count" and v.isdigit()]
    total = next((int(v) for k, v in fields if k == "Total Count" and v.isdigit()), None)
    if not _listing_understood(ctx, text, npu_ids, total):
        return
    ctx.device_count = sum(chips) if chips and len(chips) == len(npu_ids) else len(npu_ids)
    ctx.note(f"npu-smi: {ctx.device_count} NPU device(s)")
    ctx.found["NPUs"] = str(ctx.device_count)
    _cards_rule(ctx, cards, ctx.device_count)
    _visible(ctx, ctx.device_count)
    if cards is not None and cards > ctx.device_count:
        ctx.problem(AREA, f"the job starts {cards} processes per node but npu-smi lists {ctx.device_count} NPU(s) "
                          "on this node", "start at most one process per NPU (npu-migrate launch --cards N)")
    for npu in npu_ids:
        status, text = ctx.run_tool([tool, "info", "-t", "health", "-i", str(npu)])
        health = next((v for k, v in _fields(text) if k == "Health Status"), None)
        if status != 0 or health is None:
            ctx.problem(AREA, f"`npu-smi info -t health -i {npu}` failed (exit {status}): {_first_line(text)}",
                        "check the Ascend driver and this NPU (npu-smi info) before starting the job")
        elif health.upper() != "OK":
            ctx.problem(AREA, f"NPU {npu} reports health {health} (npu-smi info -t health -i {npu})",
                        "leave it out (ASCEND_RT_VISIBLE_DEVICES, fewer cards) or have the node repaired")


def _listing_understood(ctx: Context, text: str, npu_ids: list[int], total: int | None) -> bool:
    """Whether ``npu-smi info -l`` listed the NPUs (one ``NPU ID`` per NPU, as many as its
    ``Total Count``). An empty, odd or partial listing is one problem, never a count of 0
    or 8 taken on trust: the NPUs' health would go unchecked."""
    if npu_ids and (total is None or total == len(npu_ids)):
        return True
    if total == 0 and not npu_ids:
        ctx.found["NPUs"] = "0"
        ctx.problem(AREA, "npu-smi lists no NPU on this node (Total Count : 0)",
                    "check the driver and the NPUs (npu-smi info; dmesg)")
    elif npu_ids:
        ctx.found["NPUs"] = f"unclear ({len(npu_ids)} listed, Total Count {total})"
        ctx.problem(AREA, f"`npu-smi info -l` says Total Count : {total} but lists {len(npu_ids)} NPU ID(s) "
                          f"({', '.join(map(str, npu_ids))}): some NPUs are not reported",
                    "check the driver and every NPU (npu-smi info; dmesg) before starting the job")
    else:
        ctx.found["NPUs"] = "unknown (npu-smi output not understood)"
        seen = f"Total Count : {total} but no NPU ID line" if total is not None else _first_line(text)
        ctx.problem(AREA, f"`npu-smi info -l` printed no NPU list ({seen}): the NPUs and their health are unknown",
                    "check the driver and the NPUs (npu-smi info; dmesg) before starting the job")
    return False


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"
