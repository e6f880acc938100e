"""Shard a tiny Llama with torch's FSDP2 (``fully_shard``) and train it, 2 processes.

    torchrun --nproc-per-node 2 fsdp_llama.py OUT.json [--steps N]

The FSDP reference the HF Trainer cannot give on CPU: accelerate 1.15.0 turns
the Trainer's ``fsdp=`` into FSDP only for accelerator process groups
(``AcceleratorState``: MULTI_GPU/NPU/XPU/...), so a CPU Trainer run is DDP.
torch itself shards on CPU over gloo, so this loop runs the same FSDP2 code on
the emulated NPU (hccl) and on CPU (gloo): every decoder layer and then the
model ``fully_shard``-ed, AdamW, each rank its own batch. Rank 0 writes OUT,
rank 1 ``OUT.rank1``.
"""

import argparse
import os

import torch
import torch.distributed as dist
from common import TokenData, digest, on_npu, tiny_llama, write
from torch.distributed.fsdp import fully_shard


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=4)
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    if on_npu():
        device = torch.device("npu", local)
        torch.npu.set_device(device)
        dist.init_process_group("hccl")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_llama().to(device)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data, batch, losses = TokenData(), 4, []
    for step in range(a.steps):
        start = (step * world + rank) * batch
        rows = [data[i] for i in range(start, start + batch)]
        inputs = {k: torch.stack([r[k] for r in rows]).to(device) for k in ("input_ids", "attention_mask", "labels")}
        loss = model(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach().float().cpu()))
    weight = model.model.embed_tokens.weight
    report = {
        "device": str(weight.device),
        "backend": dist.get_backend(),
        "sharded": type(weight).__name__,
        "local_rows": weight.to_local().shape[0] if hasattr(weight, "to_local") else None,
        "losses": losses,
        "params": digest(model.named_parameters()),  # full_tensor(): a collective, every rank calls it
    }
    write(a.out if rank == 0 else f"{a.out}.rank{rank}", report)
    # Both ranks leave together: on gloo, a rank that tears its group down while
    # its peer's last FSDP2 collective is still in flight aborts at exit
    # ("terminate called without an active exception", 1 CPU run in 3 here).
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
