import torch
from torch import nn


class _Gaussian:
    def __init__(self, moments):
        self.mean, logvar = moments.chunk(2, dim=1)
        self.std = torch.exp(0.5 * logvar.clamp(-30.0, 20.0))

    def sample(self):
        return self.mean + self.std * torch.randn(self.mean.shape, device=self.mean.device, dtype=self.mean.dtype)


class _Encoded:
    def __init__(self, moments):
        self.latent_dist = _Gaussian(moments)


class AutoencoderKL(nn.Module):
    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.quant = nn.Conv2d(3, 8, 1)
        with torch.no_grad():
            self.quant.weight.copy_(torch.randn(self.quant.weight.shape, generator=generator) * 0.1)
            self.quant.bias.zero_()

    @classmethod
    def from_pretrained(cls, name, **kwargs):
        return cls()

    def encode(self, x):
        return _Encoded(self.quant(x))
