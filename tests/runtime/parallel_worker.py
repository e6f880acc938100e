"""Child process for tests/runtime/test_parallel.py: npu_runtime.parallel on CPU/gloo.

Launched by torchrun (two processes) or as a plain process. Trains a small
regression model for a few steps on a sharded loader, checks the wrappers, and
prints one ``REPORT {json}`` line per rank.

``--leave-group``: end as a migrated module-level script does, with the models in
module globals and the group never destroyed; the exit handler that runs last prints
one ``EXIT {json}`` line per rank with what is left for interpreter finalisation.
``--own-group`` (with ``--leave-group``): the script creates the group itself first,
so npu_runtime must leave it, and the models on it, alone; that last handler then
tears them down, as such a script does, after reporting.
"""

import atexit
import base64
import json
import os
import sys

import npu_runtime
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

GLOBAL_BATCH = 8
kept = ()  # --leave-group: what the script keeps alive into finalisation
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


def _left_at_exit(own_group):
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as fh:
            names.append(fh.read().strip())
    left = {"group_initialized": torch.distributed.is_initialized(),
            "gloo_threads": sorted(n for n in names if "gloo" in n),
            "reducers_kept": [hasattr(m, "reducer") for m in kept if isinstance(m, DistributedDataParallel)]}
    sys.stdout.write("EXIT " + json.dumps(left) + "\n")
    sys.stdout.flush()
    if own_group:  # the script's own teardown, in the safe order
        globals().pop("kept")
        torch.distributed.destroy_process_group()


def main(leave_group=False, own_group=False):
    if leave_group:  # registered before npu_runtime's own exit handler: runs after it
        atexit.register(_left_at_exit, own_group)
    if own_group:
        import torch.distributed.nn as _group_defaults  # noqa: F401  (before the group: docs/e2e.md, "Exit aborts")

        torch.distributed.init_process_group("gloo")
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
    if leave_group:
        # alive into finalisation, as a script's globals; and a DDP model the script made itself
        own_ddp = DistributedDataParallel(nn.Linear(2, 1)) if info is not None else None
        globals().update(kept=(model, plain, optimizer, own_ddp))
        return
    del model, plain, optimizer  # the DDP models go before the group (docs/e2e.md, "Exit aborts")
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(leave_group="--leave-group" in sys.argv, own_group="--own-group" in sys.argv)
