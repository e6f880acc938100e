"""A 2-process CUDA DDP script (verify's test project): nccl, a DistributedSampler
whose set_epoch is never called (NPU502 adds it), fp32, two steps per epoch, and a
checkpoint written by rank 0 after every epoch that a restart resumes from."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
data = TensorDataset(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g))
sampler = DistributedSampler(data, shuffle=True)
loader = DataLoader(data, batch_size=4, sampler=sampler)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
start = 0
if os.path.exists("ckpt.pt"):
    state = torch.load("ckpt.pt")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = state["epoch"] + 1
model = DDP(model, device_ids=[local_rank])
for epoch in range(start, 3):
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
                   "ckpt.pt")
    dist.barrier()
dist.destroy_process_group()
