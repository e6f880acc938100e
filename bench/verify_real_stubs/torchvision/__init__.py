"""A stub of torchvision for verify's real-script runs (no download, no images):
synthetic datasets, the transforms the scripts use, a tiny resnet50."""
from . import datasets, models, transforms, utils  # noqa: F401
