"""DDP training used by the emulator tests.

Under ``npu-migrate emulate --nproc 2`` it trains on npu with backend hccl;
under plain torchrun with ``--cpu`` it trains on CPU with gloo. Rank 0 writes
the final parameters and the per-step losses to OUT.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed.nn as _group_defaults  # noqa: F401  (before any group: see the end)
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--cpu", action="store_true")
parser.add_argument("--steps", type=int, default=5)
ns = parser.parse_args()

local_rank = int(os.environ["LOCAL_RANK"])
if ns.cpu:
    dist.init_process_group("gloo")
    device = torch.device("cpu")
else:
    import torch_npu  # noqa: F401

    torch.npu.set_device(local_rank)
    dist.init_process_group("hccl")
    device = torch.device(f"npu:{local_rank}")

rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
ddp = DDP(model, device_ids=None if ns.cpu else [local_rank])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

gen = torch.Generator().manual_seed(100 + rank)
losses = []
for _ in range(ns.steps):
    x = torch.randn(8, 16, generator=gen).to(device)
    y = torch.randn(8, 4, generator=gen).to(device)
    loss = nn.functional.mse_loss(ddp(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    reduced = loss.detach().clone()
    dist.all_reduce(reduced)
    losses.append(reduced.item())

gathered = [torch.zeros(2, device=device) for _ in range(dist.get_world_size())]
dist.all_gather(gathered, torch.full((2,), float(rank), device=device))
dist.barrier()

# The tensor forms torch 2.13 routes through group.*_single, and their coalesced
# forms (a _coalescing_manager block calls group.*_single_coalesced).
world = dist.get_world_size()
mine = torch.arange(4, dtype=torch.float32, device=device) + 10 * rank
tensor_forms = {}
out = torch.zeros(4 * world, device=device)
dist.all_gather_into_tensor(out, mine)
tensor_forms["all_gather_into_tensor"] = out.cpu().tolist()
out = torch.zeros(4 // world, device=device)
dist.reduce_scatter_tensor(out, mine)
tensor_forms["reduce_scatter_tensor"] = out.cpu().tolist()
out = torch.zeros(4, device=device)
dist.all_to_all_single(out, mine)
tensor_forms["all_to_all_single"] = out.cpu().tolist()
outs = [torch.zeros(4 * world, device=device), torch.zeros(2 * world, device=device)]
with dist._coalescing_manager():
    dist.all_gather_into_tensor(outs[0], mine)
    dist.all_gather_into_tensor(outs[1], mine[:2] * 2)
tensor_forms["all_gather_coalesced"] = [o.cpu().tolist() for o in outs]
outs = [torch.zeros(4 // world, device=device), torch.zeros(2 // world, device=device)]
with dist._coalescing_manager():
    dist.reduce_scatter_tensor(outs[0], mine)
    dist.reduce_scatter_tensor(outs[1], mine[:2] * 2)
tensor_forms["reduce_scatter_coalesced"] = [o.cpu().tolist() for o in outs]

# Object collectives pick their staging device from the group's device types.
objects = [{"from": rank, "step": len(losses)}, f"rank{rank}"]
dist.broadcast_object_list(objects, src=1)
everyone = [None] * dist.get_world_size()
dist.all_gather_object(everyone, {"rank": rank, "loss": losses[-1]})
try:
    dist.all_reduce(torch.ones(1))  # a CPU tensor
    cpu_tensor_collective = "accepted"
except RuntimeError as exc:
    cpu_tensor_collective = str(exc)
dist.barrier()
if rank == 0:
    torch.save(
        {
            "params": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "losses": losses,
            "gathered": [g.cpu() for g in gathered],
            "tensor_forms": tensor_forms,
            "backend": dist.get_backend(),
            "device": str(next(model.parameters()).device),
            "device_types": [str(d) for d in dist.group.WORLD._device_types],
            "broadcast_objects": objects,
            "all_gather_objects": everyone,
            "cpu_tensor_collective": cpu_tensor_collective,
        },
        ns.out,
    )
# Free DDP before destroying the group, so that Python frees the group and gloo's
# threads are joined before shutdown (docs/e2e.md, "Exit aborts").
del ddp
dist.destroy_process_group()
