"""NPU501: ``DataLoader(shuffle=True)`` under DDP -> a DistributedSampler."""

from __future__ import annotations

import re

import libcst as cst
from npu_migrate.rules.checkpoint._common import dotted, is_pure_reference

from npu_migrate.cst_util import call_arg, is_main_guard
from npu_migrate.rule import Example, Rule

from ._common import (
    DATALOADERS,
    DISTRIBUTED,
    SAMPLERS,
    find_epoch_loop,
    set_epoch_statement,
)

_SUFFIX = re.compile(r"_?(?:data_?loader|loader|dl)$", re.IGNORECASE)
_COMPREHENSIONS = (
    cst.Lambda,
    cst.CompFor,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


class DistributedSamplerForShuffle(Rule):
    id = "NPU501"
    name = "distributed-sampler"
    summary = "Give a shuffled DataLoader in DDP code a DistributedSampler (and call set_epoch each epoch)"
    triggers = (
        ("DataLoader", "shuffle", "DistributedDataParallel"),
        ("DataLoader", "shuffle", "init_process_group"),
        ("DataLoader", "shuffle", "FullyShardedDataParallel"),
        ("DataLoader", "shuffle", "fully_shard"),
    )
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

- gets `train_sampler = DistributedSampler(dataset, shuffle=True)` as a new
  statement right before the one that builds the loader. The name follows the
  loader (`val_loader` -> `val_sampler`; otherwise `train_sampler`), with a
  number added if the file already uses it;
- `shuffle=True` becomes `sampler=train_sampler` (the DataLoader refuses both);
- `from torch.utils.data.distributed import DistributedSampler` is added,
  unless the file already imports it;
- `train_sampler.set_epoch(epoch)` becomes the first statement of the epoch
  loop: the `for epoch in range(...)` loop after it, in the same function, whose
  body iterates over the loader (`for b in loader`, `enumerate(loader)`,
  `tqdm(loader)`), or passes the loader to a call when the loop variable is
  named `*epoch*` (`train_one_epoch(model, loader, epoch)`). Without set_epoch
  the sampler repeats the same order every epoch.

Reported instead of rewritten: `shuffle=<expression>` (it may be True at run
time), a positional shuffle, `**kwargs` that may carry a sampler, a dataset
that is not a plain name or attribute (it would be built twice), a loader
built inside a lambda, comprehension or compound-statement header, and files
whose every DDP / init call sits under an `if` (the script also runs without
torch.distributed, where `DistributedSampler()` raises: use
`DistributedSampler(ds) if dist.is_initialized() else None` and
`shuffle=(sampler is None)`). When no epoch loop is found the loader is still
rewritten and the missing `set_epoch` call is reported with the exact line.

Left alone: loaders with a `sampler` or `batch_sampler`, `shuffle=False`,
an `IterableDataset` (which the DataLoader refuses to shuffle anyway), and
files without DDP. The edit uses no NPU API.
"""
    examples = (
        Example(
            "import torch.distributed as dist\n"
            "from torch.utils.data import DataLoader\n"
            "\n"
            "dist.init_process_group('hccl')\n"
            "train_loader = DataLoader(train_set, batch_size=32, shuffle=True)\n"
            "for epoch in range(10):\n"
            "    for batch in train_loader:\n"
            "        step(batch)\n",
            "import torch.distributed as dist\n"
            "from torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "\n"
            "dist.init_process_group('hccl')\n"
            "train_sampler = DistributedSampler(train_set, shuffle=True)\n"
            "train_loader = DataLoader(train_set, batch_size=32, sampler=train_sampler)\n"
            "for epoch in range(10):\n"
            "    train_sampler.set_epoch(epoch)\n"
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
        self.fors: list[cst.For] = []
        self.taken: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in DATALOADERS:
            self.loaders.append(node)
        elif qualified in DISTRIBUTED:
            self.distributed.append(node)

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def leave_file(self) -> None:
        if not self.distributed or not self.loaders:
            return
        conditional = all(self._conditional(call) for call in self.distributed)
        for loader in self.loaders:
            self._check(loader, conditional)

    def _conditional(self, node: cst.CSTNode) -> bool:
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.IfExp):
                return True
            if isinstance(ancestor, cst.If) and not is_main_guard(ancestor):
                test = self.ctx.module.code_for_node(ancestor.test)
                if "is_initialized" not in test:
                    return True
        return False

    def _check(self, loader: cst.Call, conditional: bool) -> None:
        shuffle = call_arg(loader, "shuffle", 2)
        if shuffle is None or any(a.star == "*" for a in loader.args):
            return
        if (
            call_arg(loader, "sampler", 3) is not None
            or call_arg(loader, "batch_sampler", 4) is not None
        ):
            return
        value = shuffle.value
        if isinstance(value, cst.Name) and value.value in ("False", "None"):
            return
        literal_true = isinstance(value, cst.Name) and value.value == "True"
        dataset = call_arg(loader, "dataset", 0)
        if dataset is not None and self._iterable_dataset(dataset.value):
            return
        suggestion = (
            "give the loader `sampler=DistributedSampler(dataset, shuffle=True)` instead of `shuffle=True`, "
            "and call `sampler.set_epoch(epoch)` at the start of every epoch"
        )
        problem = None
        if any(a.star == "**" for a in loader.args):
            problem = "its `**` arguments may or may not carry a sampler"
        elif not literal_true:
            problem = "`shuffle` is not the literal True"
        elif shuffle.keyword is None:
            problem = "`shuffle` is passed by position"
        elif dataset is None or not is_pure_reference(dataset.value):
            problem = "the dataset is not a plain name (bind it to a variable first)"
        elif conditional:
            problem = "DDP is only used under a condition, and DistributedSampler() fails when torch.distributed is not initialized"
            suggestion = (
                "sampler = DistributedSampler(dataset, shuffle=True) if dist.is_initialized() else None; "
                "pass `sampler=sampler, shuffle=(sampler is None)`, and call `sampler.set_epoch(epoch)` when it is not None"
            )
        statement = self.ctx.enclosing_statement(loader)
        if problem is None:
            between = []
            for ancestor in self.ctx.ancestors(loader):
                if ancestor is statement:
                    break
                between.append(ancestor)
            if not isinstance(statement, cst.SimpleStatementLine) or any(
                isinstance(a, _COMPREHENSIONS) for a in between
            ):
                problem = "the loader is not built in a simple statement"
        sampler_class = self._sampler_class()
        if problem is None and sampler_class is None:
            problem = (
                "the name DistributedSampler is bound to something else in this file"
            )
        if problem is not None:
            self.report(
                loader,
                f"shuffled DataLoader in DDP code has no DistributedSampler ({problem})",
                suggestion,
            )
            return
        self._rewrite(loader, statement, shuffle, dataset.value, sampler_class)

    def _iterable_dataset(self, node: cst.CSTNode) -> bool:
        if "IterableDataset" not in self.ctx.text:
            return False
        iterable_classes = {"IterableDataset"}
        for klass in _classes(self.ctx.module):
            if any("IterableDataset" in (dotted(b.value) or "") for b in klass.bases):
                iterable_classes.add(klass.name.value)
        value = node
        if isinstance(node, cst.Name):
            scope = self.ctx.scope(node)
            assignments = list(scope[node.value]) if scope is not None else []
            if len(assignments) != 1:
                return False
            target = getattr(assignments[0], "node", None)
            assign = (
                self.ctx.parent(self.ctx.parent(target)) if target is not None else None
            )
            if not isinstance(assign, cst.Assign):
                return False
            value = assign.value
        if isinstance(value, cst.Call):
            name = (dotted(value.func) or "").rsplit(".", 1)[-1]
            return name in iterable_classes
        return False

    def _sampler_class(self) -> str | None:
        for local, qualified in self.ctx.imports.bindings.items():
            if qualified in SAMPLERS:
                return local
        if "DistributedSampler" in self.ctx.imports.bindings or re.search(
            r"(?:class|def)\s+DistributedSampler\b|\bDistributedSampler\s*=",
            self.ctx.text,
        ):
            return None
        return "DistributedSampler"

    def _name_for(self, statement: cst.SimpleStatementLine) -> tuple[str, str | None]:
        """(sampler name, loader expression or None)."""
        loader_expression = None
        base = "train"
        small = statement.body[0]
        if (
            len(statement.body) == 1
            and isinstance(small, cst.Assign)
            and len(small.targets) == 1
        ):
            loader_expression = dotted(small.targets[0].target)
            if loader_expression is not None:
                last = loader_expression.rsplit(".", 1)[-1]
                stripped = _SUFFIX.sub("", last)
                if stripped and stripped != last:
                    base = stripped
        candidate = f"{base}_sampler"
        number = 1
        while candidate in self.taken or re.search(
            rf"\b{re.escape(candidate)}\b", self.ctx.text
        ):
            number += 1
            candidate = f"{base}_sampler{number}"
        self.taken.add(candidate)
        return candidate, loader_expression

    def _rewrite(
        self,
        loader,
        statement,
        shuffle: cst.Arg,
        dataset: cst.BaseExpression,
        sampler_class: str,
    ) -> None:
        name, loader_expression = self._name_for(statement)
        dataset_code = self.ctx.module.code_for_node(dataset)
        new = cst.parse_statement(
            f"{name} = {sampler_class}({dataset_code}, shuffle=True)\n",
            config=self.ctx.module.config_for_parsing,
        )
        self.insert_before(
            statement, [new], f"shard the shuffled loader with `{name}`", anchor=loader
        )
        self.replace(
            shuffle,
            lambda arg: arg.with_changes(
                keyword=cst.Name("sampler"), value=cst.Name(name)
            ),
            f"`shuffle=True` -> `sampler={name}` (DistributedSampler shuffles per rank)",
            needs_torch_npu=False,
        )
        if (
            sampler_class == "DistributedSampler"
            and "DistributedSampler" not in self.ctx.imports.bindings
        ):
            self.add_import("torch.utils.data.distributed", "DistributedSampler")
        found = (
            find_epoch_loop(self.ctx, self.fors, loader_expression, statement)
            if loader_expression
            else None
        )
        if found is not None and found.loop is not None:
            self.insert_before(
                found.loop.body.body[0],
                [set_epoch_statement(self.ctx, name, found.loop)],
                f"`{name}.set_epoch(...)` so each epoch gets a new order",
                anchor=found.loop,
            )
            return
        why = found.why if found is not None else "the loader is not assigned to a name"
        receiver = f"{loader_expression}.sampler" if loader_expression else name
        self.report(
            loader,
            f"added a DistributedSampler, but cannot place its set_epoch call ({why})",
            f"add `{receiver}.set_epoch(epoch)` as the first statement of the epoch loop",
        )


def _classes(module: cst.Module) -> list[cst.ClassDef]:
    found: list[cst.ClassDef] = []

    class _Collect(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            found.append(node)

    module.visit(_Collect())
    return found
