"""A training job written against npu_runtime, for the emulated NPU (``--nproc 2``).

``init_distributed`` picks the npu device and the hccl backend; a ``Watchdog``
watches the optimizer steps; a ``CheckpointManager`` saves and resumes model,
optimizer, scheduler, GradScaler, data-loader generator and every RNG. With
``--hang-after K`` the job saves at step K and then hangs, so only the watchdog
can end it; a second launch resumes from that checkpoint. Every rank writes
``<out>.rank<r>`` (JSON: losses as float.hex, facts about the run).
"""

import argparse
import json
import time

import npu_runtime as nr
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--hang-after", type=int, default=None)
    parser.add_argument("--watchdog-timeout", type=float, default=120.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    info = nr.init_distributed()
    watchdog = nr.Watchdog(timeout_s=args.watchdog_timeout).start()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    dataset = TensorDataset(torch.randn(64, 12, generator=g), torch.randn(64, 1, generator=g))
    sampler = DistributedSampler(dataset, num_replicas=info.world_size, rank=info.rank, shuffle=True, seed=3)
    loader = DataLoader(dataset, batch_size=8, sampler=sampler)

    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Dropout(0.1), nn.Linear(32, 1)).to(info.device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[info.device.index])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    scaler = torch.amp.GradScaler(info.device.type, init_scale=2.0**10)
    manager = nr.CheckpointManager(args.ckpt, keep=2)

    step, epoch, skip = 0, 0, 0
    point = manager.load_latest(model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler)
    if point is not None:
        step, epoch, skip = point.step, point.epoch, point.batch_in_epoch

    ranks = torch.tensor([float(info.rank + 1)], device=info.device)
    dist.all_reduce(ranks)
    facts = {"backend": dist.get_backend(), "device": str(info.device), "world_size": info.world_size,
             "rank_sum": ranks.item(), "resumed_at": point.step if point else None}
    losses = []
    while step < args.steps:
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(nr.resume_batches(loader, skip), start=skip):
            x, y = x.to(info.device), y.to(info.device)
            with torch.autocast(info.device.type, dtype=torch.float16):
                loss = nn.functional.mse_loss(model(x).float(), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            step += 1
            losses.append(loss.item().hex())
            if step == args.hang_after:
                manager.save(step, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                             epoch=epoch, batch_in_epoch=i + 1)
                manager.wait()
                with open(f"{args.out}.rank{info.rank}", "w") as fh:
                    json.dump({**facts, "losses": losses}, fh)
                time.sleep(3600)  # a hung collective, as far as anyone can tell
            if step >= args.steps:
                break
        epoch, skip = epoch + 1, 0

    watchdog.stop()
    params = torch.cat([p.detach().cpu().flatten() for p in model.parameters()])
    with open(f"{args.out}.rank{info.rank}", "w") as fh:
        json.dump({**facts, "losses": losses, "params": params.numpy().tobytes().hex()}, fh)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
