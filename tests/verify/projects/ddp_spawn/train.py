"""A CUDA DDP script that starts its own processes with torch.multiprocessing.spawn, as
pytorch/examples' imagenet does (verify's test project): one process per GPU
(``torch.cuda.device_count()``), nccl with a tcp:// init method, the rank from the
spawn index, ``.cuda(gpu)``, a DistributedSampler whose set_epoch is never called
(NPU502 adds it), fp32, two steps per epoch, and a checkpoint written by rank 0
after every epoch that a restart resumes from."""

import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--dist-backend", default="nccl")


def main_worker(gpu, ngpus, port, args):
    dist.init_process_group(backend=args.dist_backend, init_method=f"tcp://127.0.0.1:{port}",
                            world_size=ngpus, rank=gpu)
    torch.cuda.set_device(gpu)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g))
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).cuda(gpu)
    criterion = nn.CrossEntropyLoss().cuda(gpu)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start = 0
    if os.path.exists("checkpoint.pth.tar"):
        state = torch.load("checkpoint.pth.tar", map_location=f"cuda:{gpu}")
        model.load_state_dict(state["state_dict"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
    model = DDP(model, device_ids=[gpu])
    for epoch in range(start, args.epochs):
        for x, y in loader:
            x, y = x.cuda(gpu, non_blocking=True), y.cuda(gpu, non_blocking=True)
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if gpu == 0:
            torch.save({"epoch": epoch, "state_dict": model.module.state_dict(),
                        "optimizer": optimizer.state_dict()}, "checkpoint.pth.tar")
        dist.barrier()
    dist.destroy_process_group()


def main():
    args = parser.parse_args()
    ngpus = torch.cuda.device_count()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(main_worker, nprocs=ngpus, args=(ngpus, port, args))


if __name__ == "__main__":
    main()
