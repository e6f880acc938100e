"""False health events on healthy training: how often the monitor cries wolf.

Runs three healthy, real-world-style training scripts under ``npu_runtime.install()``
(``NPU_RUNTIME_EVENTS`` set, nothing else changed) and counts the health events they
produce. Any event on these runs is a false one: nothing in them is NaN, spiking or
stalled.

- ``nanogpt``: a character-level GPT loop in nanoGPT's shape: every iteration logs
  ``loss.item()``; every ``eval_interval`` iterations ``estimate_loss()`` puts the model in
  ``eval()`` for a few no-grad batches and ``torch.save`` writes a checkpoint, between two
  optimizer steps (the iteration issue 37 saw flagged every time);
- ``epochs``: an MLP over a ``DataLoader``, an evaluation pass after each epoch;
- ``runtime_ckpt``: a loop that saves through ``CheckpointManager`` every 10 steps.

    python -m bench.health_false_events [--runs 3] [--runtime PATH]

``--runtime`` puts another checkout's ``runtime/`` first on ``PYTHONPATH`` (to measure a
previous version). Prints one line per run and a total.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

COMMON = """
import os, sys, time, math
import torch, torch.nn as nn, torch.nn.functional as F
import npu_runtime
npu_runtime.install()
torch.manual_seed(0)
torch.set_num_threads(1)
"""

SCRIPTS = {
    "nanogpt": COMMON + textwrap.dedent("""
        text = ("first citizen: before we proceed any further, hear me speak. " * 200)
        chars = sorted(set(text)); stoi = {c: i for i, c in enumerate(chars)}
        data = torch.tensor([stoi[c] for c in text])
        block, batch = 32, 16
        def get_batch():
            ix = torch.randint(len(data) - block - 1, (batch,))
            return torch.stack([data[i:i + block] for i in ix]), torch.stack([data[i + 1:i + block + 1] for i in ix])
        class GPT(nn.Module):
            def __init__(self, v, d=64):
                super().__init__()
                self.tok, self.pos = nn.Embedding(v, d), nn.Embedding(block, d)
                layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
                self.body = nn.TransformerEncoder(layer, 2)
                self.head = nn.Linear(d, v)
            def forward(self, x, y=None):
                h = self.tok(x) + self.pos(torch.arange(x.size(1)))
                mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
                logits = self.head(self.body(h, mask=mask, is_causal=True))
                return logits, (F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)) if y is not None else None)
        model = GPT(len(chars))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        @torch.no_grad()
        def estimate_loss():
            model.eval()
            losses = [model(*get_batch())[1].item() for _ in range(20)]
            model.train()
            return sum(losses) / len(losses)
        out = sys.argv[1]
        for it in range(150):
            if it % 25 == 0 and it > 0:
                val = estimate_loss()
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iter": it},
                           os.path.join(out, "ckpt.pt"))
                print(f"iter {it}: val {val:.4f}", flush=True)
            x, y = get_batch()
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            print(f"iter {it}: loss {loss.item():.4f}")
    """),
    "epochs": COMMON + textwrap.dedent("""
        from torch.utils.data import DataLoader, TensorDataset
        x = torch.randn(2048, 32); y = (x.sum(1) > 0).long()
        train = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=32, shuffle=True)
        test = DataLoader(TensorDataset(x[1536:], y[1536:]), batch_size=256)
        model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for epoch in range(4):
            model.train()
            for xb, yb in train:
                loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad(); loss.backward(); opt.step()
            model.eval()
            with torch.no_grad():
                acc = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in test) / 512
            print(f"epoch {epoch}: loss {loss.item():.4f} acc {acc:.3f}", flush=True)
    """),
    "runtime_ckpt": COMMON + textwrap.dedent("""
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        ckpt = npu_runtime.CheckpointManager(os.path.join(sys.argv[1], "ckpt"), keep=2)
        for step in range(120):
            x = torch.randn(32, 64)
            loss = (model(x) - x).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            if step % 10 == 9:
                ckpt.save(step, model=model, optimizer=opt)
        print(f"done: loss {loss.item():.4f}", flush=True)
    """),
}


def run_once(name: str, runtime: str | None) -> tuple[int, collections.Counter, float]:
    with tempfile.TemporaryDirectory(prefix="health-fp-") as tmp:
        script = os.path.join(tmp, f"{name}.py")
        with open(script, "w") as fh:
            fh.write(SCRIPTS[name])
        events = os.path.join(tmp, "events.jsonl")
        env = {**os.environ, "NPU_RUNTIME_EVENTS": events, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NPU_RUNTIME_INSTALLED", "NPU_RUNTIME_SLOW_STEP_MIN_S",
                    "NPU_RUNTIME_SLOW_STEP_FACTOR"):
            env.pop(key, None)
        if runtime:
            env["PYTHONPATH"] = runtime + os.pathsep + env.get("PYTHONPATH", "")
        start = time.monotonic()
        proc = subprocess.run([sys.executable, script, tmp], env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        took = time.monotonic() - start
        counts: collections.Counter = collections.Counter()
        if os.path.exists(events):
            with open(events) as fh:
                for line in fh:
                    counts[json.loads(line)["event"]] += 1
        return proc.returncode, counts, took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--runtime", default=None, help="a checkout's runtime/ directory to measure instead")
    parser.add_argument("--only", default=None, help="comma-separated script names")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(SCRIPTS)
    total: collections.Counter = collections.Counter()
    runs = 0
    for name in names:
        for i in range(args.runs):
            rc, counts, took = run_once(name, args.runtime)
            runs += 1
            total.update(counts)
            with open("/proc/loadavg") as fh:
                load = fh.read().split()[0]
            print(f"{name} run {i + 1}: exit {rc}, {sum(counts.values())} events {dict(counts)}, {took:.1f} s, "
                  f"load {load}", flush=True)
    print(f"total: {sum(total.values())} events in {runs} healthy runs {dict(total)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
