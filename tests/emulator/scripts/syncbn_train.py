"""Two processes: nn.SyncBatchNorm on the emulated NPU (forward, backward, running
statistics) against one process's plain BatchNorm over the whole batch, on the CPU."""

import json

import torch
import torch.distributed as dist
import torch_npu  # noqa: F401
from torch import nn

dist.init_process_group("hccl")
rank = dist.get_rank()
torch.npu.set_device(rank)
torch.manual_seed(0)
plain = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
synced = nn.SyncBatchNorm.convert_sync_batchnorm(
    nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))).npu()
synced.load_state_dict(plain.state_dict())
x = torch.randn(8, 3, 6, 6)
part = x[rank * 4:(rank + 1) * 4].npu().requires_grad_()
out = synced(part)
out.pow(2).sum().backward()
whole = x.clone().requires_grad_()
expected = plain(whole)
expected.pow(2).sum().backward()
result = {
    "out": (out.cpu() - expected[rank * 4:(rank + 1) * 4].detach()).abs().max().item(),
    "grad": (part.grad.cpu() - whole.grad[rank * 4:(rank + 1) * 4]).abs().max().item(),
    "running_var": (synced[1].running_var.cpu() - plain[1].running_var).abs().max().item(),
    "device": str(out.device.type),
}
dist.destroy_process_group()
if rank == 0:
    print(json.dumps(result))
