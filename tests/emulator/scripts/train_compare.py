"""Train the same small models on CPU and on the emulated npu; print a JSON report.

Run under ``npu-migrate emulate``. For each mode the model, data and seed are
identical; the report says whether the final parameters and losses match
bitwise (and how far apart they are otherwise).
"""

import json
import sys

import torch
import torch_npu  # noqa: F401
from torch import nn


def mlp():
    return nn.Sequential(
        nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3)
    )


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 3),
    )


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def batch(mode, gen):
    if mode == "cnn":
        return torch.randn(4, 3, 8, 8, generator=gen), torch.randint(
            0, 3, (4,), generator=gen
        )
    if mode == "lstm":
        return torch.randn(4, 5, 6, generator=gen), torch.randint(
            0, 3, (4,), generator=gen
        )
    return torch.randn(16, 10, generator=gen), torch.randint(0, 3, (16,), generator=gen)


def train(mode, device, steps=6):
    torch.manual_seed(0)
    model = {"cnn": cnn, "lstm": LSTMNet}.get(mode, mlp)().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    amp = mode == "amp"
    scaler = torch.amp.GradScaler(device.split(":")[0], enabled=amp)
    gen = torch.Generator().manual_seed(1)
    losses = []
    x, y = batch(mode, gen)  # one fixed batch: the loss must go down
    x, y = x.to(device), y.to(device)
    for _ in range(steps):
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=amp):
            out = model(x)
            loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    params = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    return params, losses, str(next(model.parameters()).device), str(out.dtype)


report = {}
for mode in sys.argv[1:]:
    p_cpu, l_cpu, _, dt_cpu = train(mode, "cpu")
    p_npu, l_npu, dev, dt_npu = train(mode, "npu:0")
    diff = max(
        (p_cpu[k].double() - p_npu[k].double()).abs().max().item()
        for k in p_cpu
        if p_cpu[k].is_floating_point()
    )
    report[mode] = {
        "device": dev,
        "out_dtype_cpu": dt_cpu,
        "out_dtype_npu": dt_npu,
        "params_equal": all(torch.equal(p_cpu[k], p_npu[k]) for k in p_cpu),
        "losses_equal": l_cpu == l_npu,
        "max_param_diff": diff,
        "losses_npu": l_npu,
        "losses_cpu": l_cpu,
    }
print(json.dumps(report))
