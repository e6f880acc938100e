import os
import random

import numpy as np
import torch
import torch.cuda as tc

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0,1")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    tc.manual_seed_all(seed)


def log_memory(prefix: str) -> None:
    if torch.cuda.is_available():
        peak = torch.cuda.max_memory_allocated() / 2**20
        print(f"{prefix}: peak {peak:.1f} MiB on {torch.cuda.get_device_name()}")
    else:
        print(prefix)


def gpu_generation() -> int:
    major, _ = torch.cuda.get_device_capability()
    return major
