"""NPU501: ``DataLoader(shuffle=True)`` under DDP -> a DistributedSampler."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example, Rule

from ._common import DATALOADERS, DISTRIBUTED, function_of
from ._shard import LoaderSharding

_INIT = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
    }
)


class DistributedSamplerForShuffle(Rule):
    id = "NPU501"
    targets = ("npu", "cpu")
    name = "distributed-sampler"
    summary = "Give a shuffled DataLoader in DDP code a DistributedSampler (and call set_epoch each epoch)"
    triggers = (
        ("DataLoader", "shuffle", "DistributedDataParallel"),
        ("DataLoader", "shuffle", "init_process_group"),
        ("DataLoader", "shuffle", "FullyShardedDataParallel"),
        ("DataLoader", "shuffle", "fully_shard"),
    )
    whole_file = True  # a loader, its epoch loop and the DDP setup live in different functions
    rationale = """
Under DDP every rank runs the same script. A `DataLoader(dataset,
shuffle=True)` without a sampler makes every rank draw from the *whole*
dataset in its own random order: an epoch then shows each sample
world-size times, and the epoch count, learning-rate schedule and metrics are
all off by that factor. Code ported from single-GPU scripts often has exactly
this; `DistributedSampler` gives each rank a disjoint shard.

In a file that uses DDP (`DistributedDataParallel`, FSDP or
`torch.distributed.init_process_group`, in any import form), a `DataLoader`
call with `shuffle=True` (the literal) and no `sampler` / `batch_sampler`:

- gets `train_sampler = DistributedSampler(dataset, shuffle=True) if
  dist.is_initialized() else None` as a new statement right before the one that
  builds the loader. The name follows the loader (`val_loader` ->
  `val_sampler`; otherwise `train_sampler`), with a number added if the file
  already uses it;
- `shuffle=True` becomes `shuffle=train_sampler is None,
  sampler=train_sampler`;
- `from torch.utils.data.distributed import DistributedSampler` is added,
  unless the file already imports it;
- `if train_sampler is not None: train_sampler.set_epoch(epoch)` becomes the
  first statement of the epoch loop: the `for epoch in range(...)` loop after
  it, in the same function, whose body iterates over the loader
  (`for b in loader`, `enumerate(loader)`, `tqdm(loader)`), or passes the loader
  to a call when the loop variable is named `*epoch*`
  (`train_one_epoch(model, loader, epoch)`). Without set_epoch the sampler
  repeats the same order every epoch.

Why the conditional form: the same training script is usually run both as
`python train.py` (one process, no process group) and under torchrun, and
`DistributedSampler()` raises "Default process group has not been
initialized" in the first case. With `... if is_initialized() else None` one
process keeps exactly what it had (the DataLoader shuffles, since
`shuffle=None is None`), and a distributed run gets the shards. This also makes
scripts that only initialise DDP under an `if` (`if args.distributed:`,
`if "RANK" in os.environ:`) safe to rewrite. The DataLoader refuses
`shuffle=True` together with a sampler, hence the `is None` test rather than
a second keyword. `is_initialized` is spelled the way the file imports
`torch.distributed` (`dist.is_initialized()`, `is_initialized()`,
`torch.distributed.is_initialized()`); a file that imports neither gets
`import torch.distributed`.

Reported instead of rewritten: `shuffle=<expression>` (it may be True at run
time), a positional shuffle, `**kwargs` that may carry a sampler, a dataset
that is not a plain name or attribute (it would be built twice), a loader
built inside a lambda, comprehension or compound-statement header, a loader
built before `init_process_group` in the same function (`is_initialized()`
would still be False there, and the sampler silently None), and a name
`torch` (or `DistributedSampler`) bound to something else. When no epoch loop
is found the loader is still rewritten and the missing `set_epoch` call is
reported with the exact line (`if isinstance(loader.sampler,
DistributedSampler): loader.sampler.set_epoch(epoch)`, since in one process
the loader holds its own RandomSampler).

Left alone: loaders with a `sampler` or `batch_sampler`, `shuffle=False`,
an `IterableDataset` (which the DataLoader refuses to shuffle anyway), and
files without DDP. The edit uses no NPU API.
"""
    examples = (
        Example(
            "import os\n"
            "import torch.distributed as dist\n"
            "import torch_npu  # noqa: F401\n"
            "from torch.utils.data import DataLoader\n"
            "\n"
            "if \"RANK\" in os.environ:\n"
            "    dist.init_process_group('hccl')\n"
            "train_loader = DataLoader(train_set, batch_size=32, shuffle=True)\n"
            "for epoch in range(10):\n"
            "    for batch in train_loader:\n"
            "        step(batch)\n",
            "import os\n"
            "import torch.distributed as dist\n"
            "import torch_npu  # noqa: F401\n"
            "from torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "\n"
            "if \"RANK\" in os.environ:\n"
            "    dist.init_process_group('hccl')\n"
            "train_sampler = DistributedSampler(train_set, shuffle=True) if dist.is_initialized() else None\n"
            "train_loader = DataLoader(train_set, batch_size=32, shuffle=train_sampler is None, sampler=train_sampler)\n"
            "for epoch in range(10):\n"
            "    if train_sampler is not None:\n"
            "        train_sampler.set_epoch(epoch)\n"
            "    for batch in train_loader:\n"
            "        step(batch)\n",
        ),
        Example(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, shuffle=True)  # no DDP here\n"
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.loaders: list[cst.Call] = []
        self.distributed: list[cst.Call] = []
        self.inits: list[cst.Call] = []
        self.fors: list[cst.For] = []

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in DATALOADERS:
            self.loaders.append(node)
        elif qualified in DISTRIBUTED:
            self.distributed.append(node)
            if qualified in _INIT:
                self.inits.append(node)

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def leave_file(self) -> None:
        if not self.distributed or not self.loaders:
            return
        sharding = LoaderSharding(
            self, self.fors, where="DDP code", built_too_early=self._built_too_early
        )
        for loader in self.loaders:
            sharding.shard(loader)
        sharding.finish()

    def _built_too_early(self, statement: cst.CSTNode) -> str | None:
        """An ``init_process_group`` call after the loader's statement, in its function:
        ``is_initialized()`` would still be False where the sampler is built."""
        home = function_of(self.ctx, statement)
        end = self.ctx.position(statement).end.line
        if any(
            function_of(self.ctx, init) is home
            and self.ctx.position(init).start.line > end
            for init in self.inits
        ):
            return "the process group is initialised after the loader is built, where `is_initialized()` is still False"
        return None
