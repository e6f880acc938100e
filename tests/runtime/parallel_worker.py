"""Child process for tests/runtime/test_parallel.py: npu_runtime.parallel on CPU/gloo.

Launched by torchrun (two processes) or as a plain process. Trains a small
regression model for a few steps on a sharded loader, checks the wrappers, and
prints one ``REPORT {json}`` line per rank.
"""

import base64
import json
import sys

import npu_runtime
import torch
import torch.distributed.nn as _group_defaults  # noqa: F401  (before any group: docs/e2e.md, "Exit aborts")
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

GLOBAL_BATCH = 8
STEPS_DATA = 32  # samples: 4 global batches


def data():
    g = torch.Generator().manual_seed(5)
    return TensorDataset(torch.randn(STEPS_DATA, 4, generator=g), torch.randn(STEPS_DATA, 1, generator=g))


def train(model, loader, sampler):
    """Two epochs of SGD; also the one-process reference of test_parallel.py."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return optimizer


def main():
    info = npu_runtime.init_data_parallel()
    torch.manual_seed(0)
    model = npu_runtime.data_parallel(nn.Linear(4, 1))
    sequential = nn.Sequential(nn.Linear(4, 2))
    sequential.tag = "kept"
    plain = npu_runtime.distribute_model(sequential)
    dataset = data()
    sampler = DistributedSampler(dataset, shuffle=True) if torch.distributed.is_initialized() else None
    loader = DataLoader(dataset, batch_size=npu_runtime.per_process_batch_size(GLOBAL_BATCH, sampler),
                        shuffle=sampler is None, sampler=sampler)
    optimizer = train(model, loader, sampler)
    # TransparentDDP: the model's own keys; a prefixed checkpoint loads; attributes pass through
    own = plain.state_dict()
    if info is not None:  # DDP: a checkpoint of a wrapped model loads too
        plain.load_state_dict({f"module.{k}": torch.zeros_like(v) for k, v in own.items()})
    else:
        plain.load_state_dict({k: torch.zeros_like(v) for k, v in own.items()})
    report = {
        "rank": torch.distributed.get_rank() if info is not None else 0,
        "world_size": info.world_size if info is not None else 1,
        "type": type(model).__name__,
        "is_data_parallel": isinstance(model, nn.DataParallel),
        "keys": sorted(model.state_dict()),
        "plain_type": type(plain).__name__,
        "plain_keys": sorted(own),
        "plain_zeroed": all(float(v.abs().sum()) == 0.0 for v in plain.state_dict().values()),
        "plain_attr": [plain.tag, len(plain), plain[0].out_features, len(list(plain))],
        "batch": loader.batch_size,
        "weight": base64.b64encode(model.module.weight.detach().numpy().tobytes()).decode(),
        "bias": base64.b64encode(model.module.bias.detach().numpy().tobytes()).decode(),
    }
    sys.stdout.write("REPORT " + json.dumps(report) + "\n")
    sys.stdout.flush()
    del model, plain, optimizer  # the DDP models go before the group (docs/e2e.md, "Exit aborts")
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
