"""Train a small classifier with DDP and mixed precision (CUDA version).

    torchrun --nproc-per-node 2 train.py --epochs 2
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.cuda.amp import GradScaler, autocast
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

from data import make_dataset
from model import Classifier
from utils import log_memory, seed_everything


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dist-backend", default="nccl")
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    return parser.parse_args()


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group(backend=args.dist_backend)
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    seed_everything(0)

    model = Classifier().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scaler = GradScaler()
    criterion = nn.CrossEntropyLoss()

    # The checkpoint holds the bare model's weights, so that a single-process run
    # and a DDP run can resume from each other's checkpoints: load before wrapping.
    start_epoch = 0
    if os.path.exists(args.checkpoint):
        ckpt = torch.load(args.checkpoint)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start_epoch = ckpt["epoch"] + 1
    if distributed:
        model = DDP(model, device_ids=[local_rank])

    dataset = make_dataset()
    loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=0)

    for epoch in range(start_epoch, args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.cuda(non_blocking=True)
            optimizer.zero_grad()
            with autocast(dtype=torch.float16):
                loss = criterion(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        torch.cuda.synchronize()
        log_memory(f"epoch {epoch} loss {loss.item():.4f}")  # printed on cuda and cpu alike
        if not distributed or dist.get_rank() == 0:
            bare = model.module if distributed else model
            torch.save({"model": bare.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, args.checkpoint)


if __name__ == "__main__":
    main()
