import torch.nn as nn


class Classifier(nn.Module):
    """A tiny MLP. Nothing here is CUDA-specific, so npu-migrate leaves it alone."""

    def __init__(self, features: int = 16, classes: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):
        return self.net(x)
