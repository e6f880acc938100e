"""NPU502: a DistributedSampler whose ``set_epoch`` is never called."""

from __future__ import annotations

import re

import libcst as cst
from npu_migrate.rules.checkpoint._common import dotted

from npu_migrate.cst_util import call_arg
from npu_migrate.rule import Example, Rule

from ._common import DATALOADERS, SAMPLERS, find_epoch_loop, set_epoch_statement

_SET_EPOCH = re.compile(r"\.\s*set_epoch\s*\(")


class SamplerSetEpoch(Rule):
    id = "NPU502"
    name = "sampler-set-epoch"
    summary = (
        "Call `sampler.set_epoch(epoch)` for a DistributedSampler that never gets it"
    )
    triggers = ("DistributedSampler",)
    rationale = """
`DistributedSampler(shuffle=True)` seeds its permutation with `seed + epoch`,
and `epoch` only changes through `sampler.set_epoch(epoch)`. Without that
call every epoch sees the same order on every rank, which quietly hurts
convergence. (Census: 99 files build a DistributedSampler and 58 of them never
call `set_epoch` in the same file; usually the call is elsewhere in the
project.)

Because the epoch loop often lives in another file than the sampler, the
decision is made per project, from `ProjectFacts.calls_set_epoch` (a text scan
of every file for `.set_epoch(`, done once before the per-file work):

- The file calls `.set_epoch(` somewhere: left alone.
- The sampler (bound to a name, or passed inline as `sampler=DistributedSampler(...)`)
  feeds a loader, and the `for epoch in range(...)` loop over that loader is in
  the same function, after it: `sampler.set_epoch(epoch)` (or
  `loader.sampler.set_epoch(epoch)` for an inline sampler) is added as the
  first statement of the loop. Loops are recognised as in NPU501
  (`for b in loader`, `enumerate(loader)`, `tqdm(loader)`, or the loader passed to
  a call when the loop variable is named `*epoch*`). Calling `set_epoch` twice
  with the same value is harmless, so this is safe even if a helper in another
  file also calls it.
- The loop is not found here and some other file of the project calls
  `.set_epoch(`: left alone (the call is most likely there).
- The loop is not found and the project never calls `set_epoch`: a finding on
  the sampler with the exact line to add.

Samplers created with `shuffle=False` are left alone: their order does not
depend on the epoch. The edit uses no NPU API.
"""
    examples = (
        Example(
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(dataset)\n"
            "loader = DataLoader(dataset, batch_size=8, sampler=sampler)\n"
            "for epoch in range(epochs):\n"
            "    for batch in loader:\n"
            "        train_step(batch)\n",
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(dataset)\n"
            "loader = DataLoader(dataset, batch_size=8, sampler=sampler)\n"
            "for epoch in range(epochs):\n"
            "    sampler.set_epoch(epoch)\n"
            "    for batch in loader:\n"
            "        train_step(batch)\n",
        ),
        Example(
            "from torch.utils.data import DistributedSampler\n"
            "sampler = DistributedSampler(dataset, shuffle=False)\n"
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.samplers: list[cst.Call] = []
        self.loaders: list[cst.Call] = []
        self.fors: list[cst.For] = []

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in SAMPLERS:
            self.samplers.append(node)
        elif qualified in DATALOADERS:
            self.loaders.append(node)

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def leave_file(self) -> None:
        if not self.samplers or _SET_EPOCH.search(self.ctx.text):
            return
        for sampler in self.samplers:
            shuffle = call_arg(sampler, "shuffle", 3)
            if (
                shuffle is not None
                and isinstance(shuffle.value, cst.Name)
                and shuffle.value.value == "False"
            ):
                continue
            self._check(sampler)

    def _check(self, sampler: cst.Call) -> None:
        name = self._bound_name(sampler)
        receiver, loader_name, loader_statement = name, None, None
        for loader in self.loaders:
            arg = call_arg(loader, "sampler", 3)
            if arg is None:
                continue
            if arg.value is sampler or (name is not None and dotted(arg.value) == name):
                loader_name = self._bound_name(loader)
                loader_statement = self.ctx.enclosing_statement(loader)
                if arg.value is sampler and loader_name is not None:
                    receiver = f"{loader_name}.sampler"
                break
        why = "it feeds no DataLoader assigned to a name in this file"
        if loader_name is not None and receiver is not None:
            found = find_epoch_loop(self.ctx, self.fors, loader_name, loader_statement)
            if found.loop is not None:
                self.insert_before(
                    found.loop.body.body[0],
                    [set_epoch_statement(self.ctx, receiver, found.loop)],
                    f"`{receiver}.set_epoch(...)` so each epoch gets a new order",
                    anchor=found.loop,
                )
                return
            why = found.why
        if self.ctx.facts.calls_set_epoch:
            return  # another file of the project calls set_epoch: most likely on this sampler
        shown = receiver or (f"{loader_name}.sampler" if loader_name else "sampler")
        self.report(
            sampler,
            f"DistributedSampler.set_epoch is never called in this project, so every epoch repeats the same order ({why})",
            f"add `{shown}.set_epoch(epoch)` as the first statement of the epoch loop",
        )

    def _bound_name(self, call: cst.Call) -> str | None:
        parent = self.ctx.parent(call)
        if (
            isinstance(parent, cst.Assign)
            and parent.value is call
            and len(parent.targets) == 1
        ):
            return dotted(parent.targets[0].target)
        if isinstance(parent, cst.AnnAssign) and parent.value is call:
            return dotted(parent.target)
        return None
