"""GradScaler("npu") with float16 autocast: overflowing steps are skipped and the
scale backs off, as on an accelerator. Prints a JSON report."""

import json

import torch
import torch_npu  # noqa: F401
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).npu()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("npu", init_scale=2.0**20, growth_interval=1000)
x, y = torch.randn(32, 8).npu(), torch.randn(32, 2).npu()
scales, losses, dtypes = [], [], set()
start = [p.detach().cpu().clone() for p in model.parameters()]
changed_after_first = None
for step in range(10):
    with torch.autocast("npu", dtype=torch.float16):
        out = model(x)
        dtypes.add(str(out.dtype))
        loss = nn.functional.mse_loss(out.float(), y)
        dtypes.add("softmax:" + str(torch.softmax(out, -1).dtype))
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    scales.append(scaler.get_scale())
    losses.append(loss.item())
    if step == 0:
        changed_after_first = any(
            not torch.equal(a, p.detach().cpu())
            for a, p in zip(start, model.parameters())
        )
legacy = torch.npu.amp.GradScaler()
with torch.npu.amp.autocast():
    legacy_dtype = str(model(x).dtype)
print(
    json.dumps(
        {
            "scales": scales,
            "losses": losses,
            "dtypes": sorted(dtypes),
            "first_step_skipped": not changed_after_first,
            "legacy_scaler_device": legacy._device,
            "legacy_autocast_dtype": legacy_dtype,
            "scale_on_npu": str(scaler._scale.device),
        }
    )
)
