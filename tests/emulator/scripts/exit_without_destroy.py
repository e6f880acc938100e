"""A two-process hccl DDP job that ends without ``destroy_process_group``, as migrated
scripts do (npu_runtime creates the group for them, and nothing destroys it).

The first thing it does is register the exit handler that runs last, after those of
the stand-in torch_npu (and of npu_runtime, with ``--runtime``). That handler prints one
JSON line per rank with what is left for interpreter finalisation: whether a process
group is still initialised, which gloo threads are alive, and how many tensors the
emulated hccl backend has handed to gloo without gloo having let go of them yet.
docs/e2e.md ("Exit aborts") says why each matters.

``--keep-model``: the DDP model stays referenced from a module global, as in a
module-level script, so it (and the group it holds) lives into finalisation.
``--runtime``: the group and the DDP model come from npu_runtime, as in migrated scripts.
"""

import atexit
import gc
import json
import os
import sys


def _threads() -> list[str]:
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8") as fh:
                names.append(fh.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return sorted(names)


def _left_at_exit() -> None:
    import torch.distributed as dist
    from torch_npu import _hccl

    staged = [o for o in gc.get_objects() if isinstance(o, _hccl._GlooCalls)]
    left = {
        "rank": int(os.environ["RANK"]),
        "group_initialized": dist.is_initialized(),
        "gloo_threads": [n for n in _threads() if "gloo" in n],
        "held_by_gloo": sum(len(calls._held) for calls in staged),
    }
    sys.stdout.write("EXIT " + json.dumps(left) + "\n")  # one write: the ranks share the stream
    sys.stdout.flush()


atexit.register(_left_at_exit)

import torch  # after the handler above: it must run last
import torch.distributed as dist
from torch import nn

keep_model = "--keep-model" in sys.argv
use_runtime = "--runtime" in sys.argv


def make_model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
    if use_runtime:
        import npu_runtime

        npu_runtime.init_data_parallel()
        return npu_runtime.data_parallel(model)
    import torch_npu  # noqa: F401

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.npu.set_device(local_rank)
    dist.init_process_group("hccl")
    return nn.parallel.DistributedDataParallel(model.npu(), device_ids=[local_rank])


def train(model: nn.Module) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(3):
        x, y = torch.randn(4, 8, generator=gen).npu(), torch.randn(4, 2, generator=gen).npu()
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP's gradient all-reduces run on the hccl group
        opt.step()


if keep_model:
    net = make_model()
    train(net)
else:
    train(make_model())
