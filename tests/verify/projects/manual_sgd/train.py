"""A CUDA script that updates its parameters by hand, as pytorch/examples'
word_language_model does without --use-optimizer (verify's test project): no
torch.optim optimizer, clip_grad_norm_, then ``p.data.add_(p.grad, alpha=-lr)``."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--late-optimizer", action="store_true", help="build and step an optimizer after one step")
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).cuda()
g = torch.Generator().manual_seed(1)
x_all, y_all = torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g)
lr = 0.5
optimizer = None
for step in range(args.steps):
    x, y = x_all[step * 8:(step + 1) * 8].cuda(), y_all[step * 8:(step + 1) * 8].cuda()
    model.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    if optimizer is not None:
        optimizer.step()
    else:
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    if args.late_optimizer and optimizer is None:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    print(f"step {step} loss {loss.item():.4f}")
