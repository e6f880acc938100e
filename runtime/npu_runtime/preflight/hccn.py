"""The NPUs' own network (RoCE), used by HCCL between servers: checked with
``hccn_tool`` where it exists, for multi-node jobs only.

Per device: ``hccn_tool -i N -link -g`` says ``link status: UP``,
``hccn_tool -i N -net_health -g`` says ``net health status: Success``, and with a
ranktable ``hccn_tool -i N -ip -g`` (``ipaddr:...``) matches the table's device_ip.
"""

from __future__ import annotations

import re

from .context import Context

AREA = "roce"

_VALUE = re.compile(r"^\s*([a-z][a-z ]*?)\s*:\s*(\S+)", re.IGNORECASE)


def _value(text: str, key: str) -> str | None:
    for line in text.splitlines():
        m = _VALUE.match(line)
        if m and m.group(1).lower() == key:
            return m.group(2)
    return None


def check(ctx: Context) -> None:
    if not ctx.multi_node:
        return
    tool = ctx.find_tool("hccn_tool")
    if tool is None:
        ctx.note("hccn_tool not found: NPU links not checked")
        return
    table_ips: dict[int, str | None] = {}
    if ctx.table is not None and ctx.local_server is not None:
        table_ips = {d.device_id: d.device_ip for d in ctx.table.server_devices(ctx.local_server)}
        devices = sorted(table_ips)
    elif ctx.job_cards is not None:
        devices = list(range(ctx.job_cards))
    else:
        return
    for dev in devices:
        status, text = ctx.run_tool([tool, "-i", str(dev), "-link", "-g"])
        link = _value(text, "link status")
        if status != 0 or link is None or link.upper() != "UP":
            ctx.problem(AREA, f"NPU {dev}: link is {link or 'unknown'} (hccn_tool -i {dev} -link -g, exit {status})",
                        "check the NPU's optical module and cable, and the switch port (hccn_tool -i N -lldp -g)")
            continue
        status, text = ctx.run_tool([tool, "-i", str(dev), "-net_health", "-g"])
        health = _value(text, "net health status")
        if status != 0 or health is None or health.lower() != "success":
            ctx.problem(AREA, f"NPU {dev}: net health is {health or 'unknown'} (hccn_tool -i {dev} -net_health -g)",
                        f"check the detect address and gateway (hccn_tool -i {dev} -netdetect -g, -gateway -g) "
                        "and /etc/hccn.conf")
        expected = table_ips.get(dev)
        if expected:
            status, text = ctx.run_tool([tool, "-i", str(dev), "-ip", "-g"])
            actual = _value(text, "ipaddr")
            if actual != expected:
                ctx.problem(AREA, f"NPU {dev}: hccn_tool -i {dev} -ip -g says {actual or 'no address'} but the "
                                  f"ranktable gives device_ip {expected}",
                            "regenerate the ranktable from this node's NPU addresses (or fix /etc/hccn.conf)")
    ctx.note(f"hccn_tool: NPU links checked on devices {devices}")
