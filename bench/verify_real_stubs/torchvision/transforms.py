class _T:
    def __init__(self, *args, **kwargs):
        self.args = args

    def __call__(self, x):
        return x


class Compose(_T):
    def __call__(self, x):
        for t in self.args[0]:
            if isinstance(t, _T):  # the script's own PIL transforms are left out: the data is synthetic
                x = t(x)
        return x


Normalize = RandomResizedCrop = RandomHorizontalFlip = RandomApply = ColorJitter = RandomGrayscale = _T
GaussianBlur = RandomSolarize = Resize = CenterCrop = Lambda = RandomCrop = _T
InterpolationMode = type("InterpolationMode", (), {"BICUBIC": 3, "BILINEAR": 2})


class ToTensor(_T):
    """A tensor passes through (the synthetic datasets); a PIL image becomes C x H x W in [0, 1]."""
    def __call__(self, x):
        import numpy as np
        import torch

        if isinstance(x, torch.Tensor):
            return x
        array = np.array(x, dtype=np.uint8, copy=True)
        array = array[:, :, None] if array.ndim == 2 else array
        return torch.from_numpy(array).permute(2, 0, 1).contiguous().float().div(255)
