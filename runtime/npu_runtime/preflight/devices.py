"""The node's NPUs: how many the job wants per server, and (where ``npu-smi`` exists)
how many the node has and whether each is healthy.

``npu-smi info -l`` prints ``Total Count : N`` and, per NPU, ``NPU ID : i`` and
``Chip Count : k`` (logical devices = the chips); ``npu-smi info -t health -i i``
prints ``Health Status : OK`` for a healthy NPU.
"""

from __future__ import annotations

import re

from .context import Context

AREA = "npus"
ATLAS_CARDS = (1, 2, 4, 8)

_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*$")


def allowed_cards(ranktable_version: str | None = None) -> tuple[int, ...]:
    """NPUs per server an Atlas training server takes; A3 (ranktable 1.2) nodes also 16."""
    return (*ATLAS_CARDS, 16) if ranktable_version and ranktable_version.startswith("1.2") else ATLAS_CARDS


def cards_rule(ranktable_version: str | None = None) -> str:
    return f"Atlas training servers take {', '.join(map(str, allowed_cards(ranktable_version)))} NPUs per server"


def _fields(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(_FIELD.match, text.splitlines()) if m]


def check(ctx: Context) -> None:
    cards = ctx.job_cards
    if ctx.table is None and cards is not None and cards not in allowed_cards():
        ctx.problem(AREA, f"{cards} processes (NPUs) per node; {cards_rule()}",
                    f"use {', '.join(map(str, ATLAS_CARDS))} NPUs per node (npu-migrate launch --cards N)")
    tool = ctx.find_tool("npu-smi")
    if tool is None:
        ctx.note("npu-smi not found: NPU count and health not checked")
        return
    status, text = ctx.run_tool([tool, "info", "-l"])
    if status != 0:
        ctx.problem(AREA, f"`npu-smi info -l` failed (exit {status}): {_first_line(text)}",
                    "check the Ascend driver (npu-smi info; dmesg) before starting the job")
        return
    fields = _fields(text)
    npu_ids = [int(v) for k, v in fields if k == "NPU ID" and v.isdigit()]
    chips = [int(v) for k, v in fields if k == "Chip Count" and v.isdigit()]
    total = next((int(v) for k, v in fields if k == "Total Count" and v.isdigit()), len(npu_ids))
    ctx.device_count = sum(chips) if chips and len(chips) == len(npu_ids) else total
    ctx.note(f"npu-smi: {ctx.device_count} NPU device(s)")
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


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"
