"""Benchmarks for the runtime (npu_runtime); see docs/runtime.md for figures.

    python bench/bench_runtime.py                 # both benchmarks, defaults
    python bench/bench_runtime.py --only watchdog --steps 200000
    python bench/bench_runtime.py --only checkpoint --mb 128 --rounds 7 --dir /tmp

1. Watchdog cost per optimizer step and per module forward: ``opt.step()`` of a
   one-scalar SGD optimizer, and a call of a one-module model (``nn.Identity``-like, so
   the call machinery is all there is to time), in alternating blocks with and without
   a started Watchdog. Forwards are timed while training (steps come: nothing is armed)
   and in an evaluation (no steps: the checker arms the one-shot forward feed after
   every quiet check interval), and the cost of one armed call is timed on its own.
   Differences are per call, in ns.
2. ``CheckpointManager.save`` (durable when it returns) and ``async_save`` versus a
   bare ``torch.save`` of the same state (model + Adam state, scheduler, GradScaler)
   into the same directory, alternating in one process. Ratios, not absolute times,
   are the result; each round's ratio uses adjacent runs.
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


def _alternate(blocks: int, per: int, call, start=None, stop=None, test_call=None) -> list[float]:
    """Per-call ns differences (test - base) over ``blocks`` alternating block pairs: the
    base block runs ``call``; the test block runs ``test_call`` (default ``call``),
    between ``start()`` and ``stop()``."""
    test_call = test_call or call

    def block(fn) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(per):
            fn()
        return (time.perf_counter_ns() - t0) / per

    for _ in range(per):  # warm-up
        call()
        test_call()
    diffs = []
    for _ in range(blocks):
        base = block(call)
        if start:
            start()
        diffs.append(block(test_call) - base)
        if stop:
            stop()
    return diffs


def bench_watchdog(steps: int, blocks: int) -> dict:
    import torch
    from npu_runtime import Watchdog

    torch.set_grad_enabled(False)
    p = torch.nn.Parameter(torch.zeros(1))
    p.grad = torch.zeros(1)
    opt = torch.optim.SGD([p], lr=0.0)

    class Same(torch.nn.Module):
        def forward(self, x):
            return x

    model, x = Same(), torch.zeros(1)
    per = max(1, steps // blocks)
    wd = Watchdog(3600.0, grace_s=3600.0)
    step = _alternate(blocks, per, opt.step, wd.start, wd.stop)
    training = _alternate(blocks, per, lambda: model(x), wd.start, wd.stop)
    # An evaluation: no steps, so the checker arms the one-shot forward feed after every
    # quiet check interval (0.25 s with this timeout; 5 s with the default one).
    evaluator = Watchdog(2.0, grace_s=3600.0)
    evaluating = _alternate(blocks, per, lambda: model(x), evaluator.start, evaluator.stop)
    # What one quiet interval costs: arming the hook, and the one module call it slows.
    armed = _alternate(blocks, max(1, per // 10), lambda: model(x), wd.start, wd.stop,
                       test_call=lambda: (wd._feeds.arm_forward(), model(x)))
    torch.set_grad_enabled(True)
    # The step hook's body alone (inside opt.step() it is lost in the noise of a ~20-40 µs step).
    hook, n = wd._feeds._step_hook, 1_000_000
    t0 = time.perf_counter_ns()
    for _ in range(n):
        hook(None, None, None)
    body = (time.perf_counter_ns() - t0) / n
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    body -= (time.perf_counter_ns() - t0) / n
    return {
        "step_hook_body_ns": body,
        "step_overhead_ns": statistics.median(step),
        "forward_overhead_ns_training": statistics.median(training),
        "forward_overhead_ns_evaluating": statistics.median(evaluating),
        "armed_forward_ns_per_quiet_interval": statistics.median(armed),
        "blocks": blocks,
        "calls_per_block": per,
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
        mgr_sync = CheckpointManager(os.path.join(work, "sync"), keep=1)
        mgr_async = CheckpointManager(os.path.join(work, "async"), keep=1)

        def bare() -> float:
            t0 = time.perf_counter()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "scaler": scaler.state_dict()}, bare_path)
            return time.perf_counter() - t0

        def durable() -> float:
            nonlocal step
            step += 1
            t0 = time.perf_counter()
            mgr_sync.save(step, model=model, optimizer=opt, scheduler=sched, scaler=scaler, epoch=0,
                          batch_in_epoch=step)
            return time.perf_counter() - t0

        def background() -> tuple[float, float]:
            nonlocal step
            step += 1
            t0 = time.perf_counter()
            handle = mgr_async.async_save(step, model=model, optimizer=opt, scheduler=sched, scaler=scaler,
                                          epoch=0, batch_in_epoch=step)
            t_ret = time.perf_counter() - t0
            handle.wait()
            return t_ret, time.perf_counter() - t0

        kinds = ["bare", "durable", "async"]
        rows = []
        step = 0
        size = 0
        for r in range(rounds + 1):  # round 0 warms the page cache and allocator, then is dropped
            got: dict = {}
            for kind in kinds[r % 3:] + kinds[: r % 3]:  # rotate the order every round
                if os.path.exists(bare_path):  # like ours, bare writes a new file, not over an old one
                    os.remove(bare_path)
                os.sync()  # every run starts with no dirty pages queued for writeback
                time.sleep(0.05)
                got[kind] = bare() if kind == "bare" else durable() if kind == "durable" else background()
            if r == 0:
                size = os.path.getsize(os.path.join(mgr_sync.checkpoints()[0][1], STATE_FILE))
                continue
            b = got["bare"]
            rows.append({"bare_s": b, "durable_s": got["durable"], "async_return_s": got["async"][0],
                         "async_durable_s": got["async"][1], "ratio_durable": got["durable"] / b,
                         "ratio_async_return": got["async"][0] / b, "ratio_async_durable": got["async"][1] / b})
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
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where checkpoints are written")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    out: dict = {"torch": torch.__version__, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    if args.only in (None, "watchdog"):
        w = out["watchdog"] = bench_watchdog(args.steps, args.blocks)
        print(f"watchdog (median of {w['blocks']} block pairs, {w['calls_per_block']} calls each):")
        print(f"  per optimizer step              {w['step_overhead_ns']:+.0f} ns "
              f"(the hook body alone: {w['step_hook_body_ns']:.0f} ns)")
        print(f"  per module forward, training    {w['forward_overhead_ns_training']:+.0f} ns")
        print(f"  per module forward, evaluating  {w['forward_overhead_ns_evaluating']:+.0f} ns "
              f"(the checker arming the one-shot forward feed every quiet interval)")
        print(f"  once per quiet check interval   {w['armed_forward_ns_per_quiet_interval']:+.0f} ns "
              f"(arming the hook and the one module call it slows)")
    if args.only in (None, "checkpoint"):
        c = out["checkpoint"] = bench_checkpoint(args.mb, args.rounds, args.dir)
        m = c["median"]
        print(f"checkpoint: state {c['state_bytes'] / 1e6:.0f} MB, bare torch.save {m['bare_s'] * 1e3:.0f} ms (median)")
        print(f"  save(), durable when it returns   {m['ratio_durable']:.2f}x bare")
        print(f"  async_save() returns              {m['ratio_async_return']:.2f}x bare")
        print(f"  async_save() + wait(), durable    {m['ratio_async_durable']:.2f}x bare")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
