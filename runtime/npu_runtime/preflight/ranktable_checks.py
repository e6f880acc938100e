"""The ranktable beyond what parsing enforces (``npu_runtime.ranktable`` already
rejects a status other than completed and ranks that are not unique and dense):
device ids within the node's NPUs and unique per server, this host listed, the same
supported NPU count on every server, device IPs for a multi-server job."""

from __future__ import annotations

from collections import Counter

from .context import Context
from .devices import allowed_cards, cards_rule

AREA = "ranktable"


def check(ctx: Context) -> None:
    table = ctx.table
    if table is None:
        return
    where = f"ranktable {table.path}"
    limit = ctx.device_count if ctx.device_count is not None else (16 if table.version.startswith("1.2") else 8)
    why = "npu-smi lists" if ctx.device_count is not None else "a server has at most"
    bad = [d for d in table.devices if not 0 <= d.device_id < limit]
    if bad:
        d = bad[0]
        ctx.problem(AREA, f"{where}: rank_id {d.rank} on server {d.server_id} has device_id {d.device_id}, "
                          f"outside 0..{limit - 1} ({why} {limit} NPUs)",
                    "give each rank a device_id of an NPU its server has (npu-smi info -l)")
    for server_index, (server_id, _ip) in enumerate(table.servers()):
        ids = Counter(d.device_id for d in table.server_devices(server_index))
        twice = sorted(i for i, n in ids.items() if n > 1)
        if twice:
            ctx.problem(AREA, f"{where}: server {server_id} gives device_id {twice[0]} to {ids[twice[0]]} ranks",
                        "one rank per NPU: each device_id once per server")
    _this_host(ctx, where)
    _cards_per_server(ctx, where)
    if len(table.servers()) > 1:
        missing = [d for d in table.devices if not d.device_ip]
        if missing:
            d = missing[0]
            ctx.problem(AREA, f"{where}: rank_id {d.rank} (server {d.server_id}, device {d.device_id}) has no "
                              f"device_ip, which HCCL needs between servers",
                        f"add each NPU's RoCE address (hccn_tool -i {d.device_id} -ip -g on that server)")


def _this_host(ctx: Context, where: str) -> None:
    if ctx.local_server is not None or not ctx.host_ids:
        return
    if any("this host" in p.message for p in ctx.problems):
        return  # the resolver already said so
    listed = ", ".join(sid if ip is None else f"{sid} ({ip})" for sid, ip in ctx.table.servers())
    ctx.problem(AREA, f"{where} does not list this host (its names and addresses: {', '.join(ctx.host_ids)}; "
                      f"listed: {listed})",
                "run on a server of the table, or set NPU_RUNTIME_HOST_IP to the address the table uses for it")


def _cards_per_server(ctx: Context, where: str) -> None:
    table = ctx.table
    counts = {sid: len(table.server_devices(i)) for i, (sid, _ip) in enumerate(table.servers())}
    allowed = allowed_cards(table.version, ctx.device_count)
    odd = {sid: n for sid, n in counts.items() if n not in allowed}
    if odd:
        sid, n = next(iter(odd.items()))
        ctx.problem(AREA, f"{where}: server {sid} has {n} NPUs; {cards_rule(table.version, ctx.device_count)}",
                    f"use {', '.join(map(str, allowed))} NPUs per server")
    elif len(set(counts.values())) > 1:
        shown = ", ".join(f"{sid}: {n}" for sid, n in counts.items())
        ctx.problem(AREA, f"{where}: servers have different NPU counts ({shown})",
                    "use the same number of NPUs on every server")
