"""Command line of the node preflight (``python -m npu_runtime.preflight``,
``npu-preflight``, ``npu-migrate preflight``).

Problems go to stdout, one line each (``area: problem; fix: what to do``); a summary
goes to stderr. Exit 0: no problem; 1: problems; 2: bad options.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import helpstyle
from ..distributed import default_host_ids
from . import run_checks
from .context import ASCEND_ROOT, DRIVER_TOOLS, Context

DEFAULT_RANKTABLE_TIMEOUT_S = 300.0  # as init_distributed() waits


def _master(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not ADDR:PORT")
    return host, int(port)


def _count(value: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return int(value)


def _index(value: str) -> int:
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number >= 0")
    return int(value)


EPILOG = """\
  Examples:
    npu-preflight --nodes 2 --cards 8 --node-rank 0 --master 10.0.0.1:29500
    npu-preflight -v                       also list what was checked and skipped
    python -m npu_runtime.preflight -q     only the problems (in a job's entry script)

  Exit codes:
    0  every check passed (or was skipped, with -v saying why)
    1  at least one problem (one line each, with its fix)
    2  bad options
"""


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number of seconds >= 0")
    return seconds


def parser(prog: str | None) -> argparse.ArgumentParser:
    p = helpstyle.parser(
        prog,
        "Check this Ascend training node before the job starts: the launch environment (every source "
        "init_distributed() reads, and whether they agree), the ranktable, HCCL's settings and ports, kernel "
        "settings against the job size, the rendezvous, and, where npu-smi / hccn_tool exist, the NPUs and "
        "their links. One line per problem with its fix.",
        EPILOG,
    )
    p.add_argument("--nodes", type=_count, help="nodes in the job (the launcher's NNODES)")
    p.add_argument("--cards", type=_count, help="NPUs (processes) per node (the launcher's NPROC_PER_NODE)")
    p.add_argument("--node-rank", type=_index, help="this node's index, 0 on the master")
    p.add_argument("--master", type=_master, metavar="ADDR:PORT", help="the rendezvous (MASTER_ADDR:MASTER_PORT)")
    p.add_argument("--ranktable-timeout", type=_seconds, metavar="S",
                   help="wait this long for RANK_TABLE_FILE to be completed "
                        "(default: NPU_RUNTIME_RANKTABLE_TIMEOUT, else 300)")
    p.add_argument("--master-wait", type=_seconds, default=30.0, metavar="S",
                   help="retry resolving and reaching the master this long (default 30)")
    p.add_argument("--proc-root", type=Path, default=Path("/proc"), metavar="DIR",
                   help="read kernel settings from DIR/sys (default /proc)")
    p.add_argument("--accelerator", metavar="NAME",
                   help="the server series the job was generated for (ring-controller.atlas: ascend-910 is the Atlas "
                        "training series, where HCCL_EXEC_TIMEOUT is a multiple of 68)")
    p.add_argument("--python", metavar="PYTHON", default=sys.executable,
                   help="the interpreter whose torch and torch_npu the job uses (default: this one)")
    p.add_argument("--ascend-root", type=Path, default=ASCEND_ROOT, metavar="DIR",
                   help="where the driver and CANN are installed (default /usr/local/Ascend)")
    p.add_argument("--dev-root", type=Path, default=Path("/dev"), metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="also say what was checked and what was skipped")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the problems")
    return p


def main(argv: Sequence[str] | None = None, prog: str | None = None,
         environ: Mapping[str, str] | None = None) -> int:
    ns = parser(prog).parse_args(argv)  # prog None: the command's own name (npu-preflight)
    environ = dict(os.environ if environ is None else environ)
    timeout = ns.ranktable_timeout
    problems_first = []
    if timeout is None:
        raw = environ.get("NPU_RUNTIME_RANKTABLE_TIMEOUT", "").strip()
        try:
            timeout = float(raw) if raw else DEFAULT_RANKTABLE_TIMEOUT_S
            if not math.isfinite(timeout) or timeout < 0:
                raise ValueError(raw)
        except ValueError:
            problems_first.append(f"NPU_RUNTIME_RANKTABLE_TIMEOUT={raw!r} is not a finite number of seconds >= 0")
            timeout = 0.0
    ctx = Context(environ, nodes=ns.nodes, cards=ns.cards, node_rank=ns.node_rank, master=ns.master,
                  proc_root=ns.proc_root, tool_dirs=DRIVER_TOOLS, ranktable_timeout_s=timeout,
                  master_wait_s=ns.master_wait, host_ids=default_host_ids(environ), accelerator=ns.accelerator,
                  python=ns.python, ascend_root=ns.ascend_root, dev_root=ns.dev_root)
    for message in problems_first:
        ctx.problem("launch env", message, "set it to the seconds to wait for the ranktable, or unset it")
    problems = run_checks(ctx)
    for problem in problems:
        print(problem.line(), flush=True)
    if ns.verbose:
        for note in ctx.notes:
            print(f"checked: {note}", file=sys.stderr)
    if not ns.quiet:
        print(f"found: {_found(ctx)}", file=sys.stderr)
        host = socket.gethostname()
        if problems:
            print(f"preflight: {len(problems)} problem(s) on {host}", file=sys.stderr)
        else:
            print(f"preflight: {host} is ready ({_shape(ctx)})", file=sys.stderr)
    return 1 if problems else 0


def _found(ctx: Context) -> str:
    """What the node has next to what the job asks."""
    asked = f" (asked: {ctx.job_cards} per node)" if ctx.job_cards is not None else ""
    parts = [f"NPUs {ctx.found.get('NPUs', 'unknown')}{asked}"]
    parts += [f"{name} {ctx.found.get(name, 'unknown')}" for name in ("driver", "CANN", "torch", "torch_npu")]
    return ", ".join(parts)


def _shape(ctx: Context) -> str:
    nodes, cards = ctx.job_nodes, ctx.job_cards
    source = ctx.spec.source if ctx.spec is not None else "no launcher"
    if nodes is None or cards is None:
        return f"launch environment: {source}"
    return f"{nodes} node(s) x {cards} NPU(s), launch environment: {source}"
