"""timm.models.layers.LayerNorm2d, imported by kentaroy47/vision-transformers-cifar10's
models/dyt.py (not trained by the bench): a LayerNorm over the channels of an NCHW tensor."""
import torch.nn.functional as F
from torch import nn


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)
