"""Train a small U-Net from a DataLoader with pin_memory=True and 2 workers.

``python unet_pin_memory.py cpu OUT`` is the CPU reference; under
``npu-migrate emulate`` with ``npu OUT`` the same training runs on the emulated
NPU, as a migrated script would (``.to(device, non_blocking=True)``). Saves the
losses and the final state dict (on CPU) to OUT.
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

device, out = sys.argv[1], sys.argv[2]
if device == "npu":
    import torch_npu  # noqa: F401


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1, self.down2 = Block(3, 8), Block(8, 16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.up1 = Block(16, 8)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        a = self.down1(x)
        b = self.down2(F.max_pool2d(a, 2))
        return self.head(self.up1(torch.cat([self.up(b), a], 1)))


def main():
    torch.manual_seed(0)
    images = torch.randn(64, 3, 16, 16)
    masks = (torch.rand(64, 1, 16, 16) > 0.5).float()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(images, masks),
        batch_size=8,
        shuffle=True,
        pin_memory=True,  # on CPU torch turns it off (no accelerator)
        num_workers=2,
    )
    model = UNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses, pinned = [], []
    for _ in range(2):
        for x, y in loader:
            pinned.append(x.is_pinned())
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.binary_cross_entropy_with_logits(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save({"losses": losses, "state": state, "pinned": pinned}, out)


if __name__ == "__main__":
    main()
