"""Benchmarks for the runtime shim (npu_runtime); see docs/runtime.md for figures.

    python bench/bench_runtime.py                 # both benchmarks, defaults
    python bench/bench_runtime.py --only watchdog --steps 200000
    python bench/bench_runtime.py --only checkpoint --mb 128 --rounds 7 --dir /tmp

1. Watchdog cost per optimizer step: ``opt.step()`` of a one-scalar SGD optimizer
   timed in alternating blocks with and without a started Watchdog (its global step
   post-hook registered); the per-step difference is reported in ns, next to the cost
   of the hook body alone.
2. ``CheckpointManager.save`` versus a bare ``torch.save`` of the same state (model +
   Adam state) into the same directory, alternating in one process. Ratios, not
   absolute times, are the result; each round's ratio uses adjacent runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def bench_watchdog(steps: int, blocks: int) -> dict:
    import torch
    from npu_runtime import Watchdog

    p = torch.nn.Parameter(torch.zeros(1))
    p.grad = torch.zeros(1)
    opt = torch.optim.SGD([p], lr=0.0)
    per = max(1, steps // blocks)

    def block() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(per):
            opt.step()
        return (time.perf_counter_ns() - t0) / per

    for _ in range(per):  # warm-up
        opt.step()
    base, hooked = [], []
    wd = Watchdog(3600.0)
    for _ in range(blocks):
        base.append(block())
        wd.start()
        hooked.append(block())
        wd.stop()
    diffs = [h - b for h, b in zip(hooked, base)]
    n = 1_000_000
    t0 = time.perf_counter_ns()
    hook = wd._optimizer_hook
    for _ in range(n):
        hook(None, None, None)
    body = (time.perf_counter_ns() - t0) / n
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    loop = (time.perf_counter_ns() - t0) / n
    return {
        "step_ns_without": statistics.median(base),
        "step_ns_with": statistics.median(hooked),
        "overhead_ns_per_step_median": statistics.median(diffs),
        "overhead_ns_per_step_min_block": min(diffs),
        "hook_body_ns": body - loop,
        "blocks": blocks,
        "steps_per_block": per,
    }


def _state(mb: int):
    import torch

    n = mb * 1024 * 1024 // 4
    width = 4096
    rows = max(1, n // width)
    model = torch.nn.Sequential(torch.nn.Linear(width, rows // 2, bias=False),
                                torch.nn.Linear(rows - rows // 2, width, bias=False))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for prm in model.parameters():
        prm.grad = torch.zeros_like(prm)
    opt.step()  # materialise exp_avg / exp_avg_sq: state = 3x the model
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    scaler = torch.amp.GradScaler("cpu")
    return model, opt, sched, scaler


def bench_checkpoint(mb: int, rounds: int, directory: str) -> dict:
    import torch
    from npu_runtime import CheckpointManager
    from npu_runtime.checkpoint import STATE_FILE

    model, opt, sched, scaler = _state(mb)
    work = tempfile.mkdtemp(prefix="npu_runtime-bench-", dir=directory)
    try:
        bare_path = os.path.join(work, "bare.pt")
        mgr_bg = CheckpointManager(os.path.join(work, "bg"), keep=1, background=True)
        mgr_sync = CheckpointManager(os.path.join(work, "sync"), keep=1, background=False)

        def bare() -> float:
            t0 = time.perf_counter()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "scaler": scaler.state_dict()}, bare_path)
            return time.perf_counter() - t0

        def ours(mgr) -> tuple[float, float]:
            nonlocal step
            step += 1
            t0 = time.perf_counter()
            mgr.save(step, model=model, optimizer=opt, scheduler=sched, scaler=scaler, epoch=0, batch_in_epoch=step)
            t_ret = time.perf_counter() - t0
            mgr.wait()
            return t_ret, time.perf_counter() - t0

        kinds = ["bare", "bg", "sync"]
        rows = []
        step = 0
        for r in range(rounds + 1):  # round 0 warms the page cache and allocator, then is dropped
            got = {}
            for kind in kinds[r % 3:] + kinds[: r % 3]:  # rotate the order every round
                if os.path.exists(bare_path):  # like ours, bare writes a new file, not over an old one
                    os.remove(bare_path)
                os.sync()  # every run starts with no dirty pages queued for writeback
                time.sleep(0.05)
                if kind == "bare":
                    got["bare"] = bare()
                else:
                    got[kind] = ours(mgr_bg if kind == "bg" else mgr_sync)
            if r == 0:
                size = os.path.getsize(os.path.join(mgr_bg.checkpoints()[0][1], STATE_FILE))
                continue
            b = got["bare"]
            rows.append({"bare_s": b, "save_return_s": got["bg"][0], "save_durable_s": got["bg"][1],
                         "sync_s": got["sync"][1],
                         "ratio_return": got["bg"][0] / b, "ratio_durable": got["bg"][1] / b,
                         "ratio_sync": got["sync"][1] / b})
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        return {"state_bytes": size, "rounds": rounds, "median": med, "rows": rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["watchdog", "checkpoint"])
    ap.add_argument("--steps", type=int, default=200_000, help="optimizer steps for the watchdog bench")
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--mb", type=int, default=48, help="model size in MB (saved state is about 3x: Adam)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where checkpoints are written")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    out: dict = {"torch": torch.__version__, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    if args.only in (None, "watchdog"):
        w = out["watchdog"] = bench_watchdog(args.steps, args.blocks)
        print(f"watchdog: opt.step() {w['step_ns_without']:.0f} ns -> {w['step_ns_with']:.0f} ns; "
              f"overhead {w['overhead_ns_per_step_median']:.0f} ns/step (median of {w['blocks']} blocks), "
              f"hook body {w['hook_body_ns']:.0f} ns")
    if args.only in (None, "checkpoint"):
        c = out["checkpoint"] = bench_checkpoint(args.mb, args.rounds, args.dir)
        m = c["median"]
        print(f"checkpoint: state {c['state_bytes'] / 1e6:.0f} MB, bare torch.save {m['bare_s'] * 1e3:.0f} ms (median)")
        print(f"  save() returns      {m['ratio_return']:.2f}x bare (background finalize)")
        print(f"  save()+wait durable {m['ratio_durable']:.2f}x bare (crc32 + fsync + rename + latest + prune)")
        print(f"  background=False    {m['ratio_sync']:.2f}x bare")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
