"""A CUDA AMP training script with a GradScaler and auto-resume (verify's test project).

Two steps per epoch; a checkpoint (model, optimizer, epoch; no scaler state, as in
most real scripts) after every epoch; a restart resumes from it. The scaler grows
every step (growth_interval=1), so a scale that is not restored shows at once.
"""

import argparse
import os

import torch
import torch.nn as nn
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--checkpoint", default="ckpt/last.pt")
parser.add_argument("--exit-note", default=None, help="a file written however the run ends (in a finally)")
parser.add_argument("--save-args", action="store_true",
                    help="put the argparse Namespace into the checkpoint, as facebookresearch/dino does: "
                         "torch.load (weights_only, torch >= 2.6) then refuses the restart")
parser.add_argument("--no-rng-state", action="store_true",
                    help="do not restore the RNG state at a restart, as nanoGPT and llama2.c do not: the "
                         "restart shuffles its next epoch as the first, and its resume is not exact")
args = parser.parse_args()

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator().manual_seed(1)
data = TensorDataset(torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g))
loader = DataLoader(data, batch_size=8, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scaler = GradScaler(init_scale=2.0**4, growth_interval=1)
start = 0
if os.path.exists(args.checkpoint):
    state = torch.load(args.checkpoint)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if not args.no_rng_state:
        torch.set_rng_state(state["rng"])
    start = state["epoch"] + 1
try:
    for epoch in range(start, args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with autocast():
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        os.makedirs(os.path.dirname(args.checkpoint), exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                    "rng": torch.get_rng_state()}, args.checkpoint)
        if args.save_args:
            torch.save({**torch.load(args.checkpoint), "args": args}, args.checkpoint)
        print(f"epoch {epoch} loss {loss.item():.4f}")
finally:
    if args.exit_note:
        with open(args.exit_note, "w") as fh:
            fh.write("ended\n")
