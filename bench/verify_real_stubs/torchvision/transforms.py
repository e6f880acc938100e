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


ToTensor = Normalize = RandomResizedCrop = RandomHorizontalFlip = RandomApply = ColorJitter = RandomGrayscale = _T
GaussianBlur = RandomSolarize = Resize = CenterCrop = Lambda = _T
InterpolationMode = type("InterpolationMode", (), {"BICUBIC": 3, "BILINEAR": 2})
