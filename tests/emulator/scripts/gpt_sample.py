"""A tiny minGPT-style language model trained by two processes (mp.spawn, DDP over hccl) on
the emulated NPU, then sampled: the shape of a real two-process GPT script (dropout,
AdamW, a shuffled DistributedSampler, a checkpoint, destroy_process_group, multinomial
sampling). Each rank prints one JSON line with its unrounded losses and sampled tokens.

    python -m npu_migrate.emulate gpt_sample.py [--steps N]
"""

import argparse
import json
import math
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

TEXT = ("the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. " * 8)
BLOCK = 16


class Chars(Dataset):
    def __init__(self):
        chars = sorted(set(TEXT)) if os.environ.get("GPT_SORTED_VOCAB", "1") == "1" else list(set(TEXT))
        self.vocab = len(chars)
        self.data = torch.tensor([chars.index(c) for c in TEXT], dtype=torch.long)

    def __len__(self):
        return len(self.data) - BLOCK - 1

    def __getitem__(self, i):
        chunk = self.data[i:i + BLOCK + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))
        self.drop = nn.Dropout(0.1)
        self.register_buffer("mask", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.drop(self.proj(y))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d=32, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, BLOCK, d))
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.tok(idx) + self.pos[:, :idx.size(1)]
        logits = self.head(self.ln(self.blocks(x)))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


@torch.no_grad()
def sample(model, idx, n):
    for _ in range(n):
        logits, _ = model(idx[:, -BLOCK:])
        probs = F.softmax(logits[:, -1, :] / 0.9, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
    return idx


def worker(rank, world, port, steps, outdir, workers=0, amp=False):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("hccl", rank=rank, world_size=world)
    torch.npu.set_device(rank)
    device = torch.device(f"npu:{rank}")
    torch.manual_seed(1337)  # the same initial weights on both ranks
    data = Chars()
    model = GPT(data.vocab).to(device)
    ddp = DDP(model, device_ids=[rank])
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3, weight_decay=0.1)
    torch.manual_seed(1337 + rank)  # per-rank dropout and sampling
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=7)
    loader = DataLoader(data, batch_size=8, sampler=sampler, num_workers=workers, pin_memory=workers > 0,
                        persistent_workers=workers > 0)
    losses = []
    step = 0
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with torch.autocast("npu", dtype=torch.bfloat16, enabled=amp):
                _, loss = ddp(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            step += 1
            if step >= steps * (epoch + 1):
                break
    if rank == 0:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, os.path.join(outdir, "ckpt.pt"))
    dist.barrier()
    model.eval()
    tokens = sample(model, torch.zeros((1, 1), dtype=torch.long, device=device), 24)[0].tolist()
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as fh:
        json.dump({"rank": rank, "losses": [repr(v) for v in losses], "tokens": tokens}, fh)
    dist.destroy_process_group()  # the DDP model (and its reducer) outlives the group, as in real scripts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default=None)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers (pinned batches)")
    parser.add_argument("--amp", action="store_true", help="bf16 autocast")
    args = parser.parse_args()
    outdir = args.out or tempfile.mkdtemp(prefix="gpt-sample-")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(2, port, args.steps, outdir, args.workers, args.amp), nprocs=2, join=True)
    for rank in range(2):
        with open(os.path.join(outdir, f"rank{rank}.json")) as fh:
            print(fh.read(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
