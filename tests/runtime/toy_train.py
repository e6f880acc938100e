"""A tiny but complete training loop for the runtime's process tests.

Dropout (torch RNG), data augmentation drawing from python, numpy and torch RNGs,
Adam, a StepLR scheduler and a GradScaler, an epoch-seeded DistributedSampler, and a
CheckpointManager with mid-epoch resume. Losses are appended as float.hex per step.
It calls ``npu_runtime.install()`` first, as a migrated entry point does, so the watchdog
runs (its timeout from NPU_RUNTIME_WATCHDOG_TIMEOUT). ``--hang-at K --hang-rank R``
makes rank R hang for good after step K in the first attempt of a torchrun job
(TORCHELASTIC_RESTART_COUNT=0), as a stuck collective would.
"""

import argparse
import os
import random
import signal
import sys
import threading

import npu_runtime as nr
import numpy as np
import torch
import torch.distributed.nn as _group_defaults  # noqa: F401  (before any group: see the end of main)
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Noisy(Dataset):
    def __init__(self, n=24):
        g = torch.Generator().manual_seed(123)
        self.x = torch.randn(n, 8, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        scale = 1.0 + 0.1 * random.random() + 0.1 * float(np.random.rand())
        return self.x[i] * scale + 0.01 * torch.randn(8), self.y[i]


def _gloo_threads() -> int:
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as fh:
            names.append(fh.read())
    return sum("gloo" in name for name in names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--save-every", type=int, default=0)
    ap.add_argument("--save-at", type=int, nargs="*", default=[])
    ap.add_argument("--kill-at", type=int, default=-1, help="SIGKILL self right after saving this step")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sharded", action="store_true")
    ap.add_argument("--hang-at", type=int, default=-1, help="hang for good after this step (first attempt)")
    ap.add_argument("--hang-rank", type=int, default=1)
    args = ap.parse_args()

    nr.install()
    info = nr.init_distributed()
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1))
    if info.world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    ds = Noisy()
    sampler = DistributedSampler(ds, num_replicas=info.world_size, rank=info.rank, shuffle=True, seed=7)
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    mgr = nr.CheckpointManager(args.ckpt, keep=2, sharded=args.sharded)

    step, epoch0, skip = 0, 0, 0
    rp = mgr.load_latest(model=model, optimizer=opt, scheduler=sched, scaler=scaler)
    if rp is not None:
        step, epoch0, skip = rp.step, rp.epoch, rp.batch_in_epoch
        print(f"rank {info.rank} resumed at step {step} epoch {epoch0} batch {skip}", flush=True)
    out = open(f"{args.out}.rank{info.rank}", "a")  # noqa: SIM115 - open for the whole run
    epoch = epoch0
    while step < args.steps:
        sampler.set_epoch(epoch)
        first = skip if epoch == epoch0 else 0
        for i, (x, y) in enumerate(nr.resume_batches(loader, first), start=first):
            loss = torch.nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            out.write(f"{step} {loss.item().hex()}\n")
            out.flush()
            if step in args.save_at or (args.save_every and step % args.save_every == 0):
                mgr.save(step, model=model, optimizer=opt, scheduler=sched, scaler=scaler,
                         epoch=epoch, batch_in_epoch=i + 1)
                if step == args.kill_at:  # right after save() returned: it must be durable
                    os.kill(os.getpid(), signal.SIGKILL)
            if step == args.hang_at and info.rank == args.hang_rank and first_attempt:
                print(f"rank {info.rank} hangs after step {step}", flush=True)
                threading.Event().wait()
            if step >= args.steps:
                break
        epoch += 1
    mgr.wait()
    params = {k: v for k, v in (model.module if info.world_size > 1 else model).state_dict().items()}
    torch.save(params, f"{args.out}.rank{info.rank}.params.pt")
    torch.distributed.barrier()
    # Teardown order (docs/e2e.md, "Exit aborts"): drop DDP before destroying the
    # group, so that destroy_process_group frees it from Python, not DDP's reducer.
    del model
    torch.distributed.destroy_process_group()
    # Freed now, its gloo threads joined: none is left to abort the shutdown.
    assert _gloo_threads() == 0, f"{_gloo_threads()} gloo threads outlived destroy_process_group"
    return 0


if __name__ == "__main__":
    sys.exit(main())
