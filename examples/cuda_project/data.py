import torch
from torch.utils.data import TensorDataset


def make_dataset(n: int = 512, features: int = 16, classes: int = 4) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=generator)
    y = torch.randint(0, classes, (n,), generator=generator)
    return TensorDataset(x, y)
