import torch


class MNIST(torch.utils.data.Dataset):
    def __init__(self, root, train=True, download=False, transform=None, **kwargs):
        g = torch.Generator().manual_seed(0 if train else 1)
        n = 256 if train else 64
        self.x = torch.rand(n, 1, 28, 28, generator=g)  # pixels in [0, 1], as ToTensor gives them
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i])


class ImageFolder(torch.utils.data.Dataset):
    """Synthetic 32x32 images; the transform is a pair-maker (barlowtwins' Transform)."""
    def __init__(self, root, transform=None, **kwargs):
        g = torch.Generator().manual_seed(2)
        self.x = torch.randn(64, 3, 32, 32, generator=g)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        return (self.transform(x) if self.transform else x), 0


class FakeData(torch.utils.data.Dataset):
    """Random images as tensors (torchvision's FakeData draws PIL images; the stub's
    transforms pass tensors through)."""
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, **kwargs):
        self.size, self.image_size, self.num_classes = size, image_size, num_classes

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.image_size, generator=g), int(torch.randint(0, self.num_classes, (1,), generator=g))


class CIFAR10(torch.utils.data.Dataset):
    """Synthetic 32x32 RGB images in [0, 1] (as ToTensor gives them), 64 for training and
    100 for testing (kentaroy47/vision-transformers-cifar10)."""
    def __init__(self, root, train=True, download=False, transform=None, **kwargs):
        g = torch.Generator().manual_seed(3 if train else 4)
        n = 64 if train else 100
        self.x = torch.rand(n, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.transform = transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        return (self.transform(x) if self.transform else x), int(self.y[i])


CIFAR100 = CIFAR10
