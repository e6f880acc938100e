"""NPU501: ``DataLoader(shuffle=True)`` under DDP -> a DistributedSampler."""

from __future__ import annotations

import re

import libcst as cst
from npu_migrate.rules.checkpoint._common import dotted, insert_above, is_pure_reference

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.rule import Example, Rule

from ._common import (
    DATALOADERS,
    DISTRIBUTED,
    SAMPLERS,
    find_epoch_loop,
    function_of,
    is_initialized_call,
    set_epoch_line,
    set_epoch_statement,
)

_INIT = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
    }
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
        self.taken: set[str] = set()

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
        for loader in self.loaders:
            self._check(loader)

    def _initialised_later(self, statement: cst.CSTNode) -> bool:
        """An ``init_process_group`` call after the loader's statement, in its function:
        ``is_initialized()`` would still be False where the sampler is built."""
        home = function_of(self.ctx, statement)
        end = self.ctx.position(statement).end.line
        return any(
            function_of(self.ctx, init) is home
            and self.ctx.position(init).start.line > end
            for init in self.inits
        )

    def _check(self, loader: cst.Call) -> None:
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
            "sampler = DistributedSampler(dataset, shuffle=True) if dist.is_initialized() else None; "
            "pass `shuffle=sampler is None, sampler=sampler` to the loader, and start every epoch with "
            "`if sampler is not None: sampler.set_epoch(epoch)`"
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
        if problem is None and self._initialised_later(statement):
            problem = "the process group is initialised after the loader is built, where `is_initialized()` is still False"
            suggestion = "build the loader after `init_process_group(...)`; then " + suggestion
        sampler_class = self._sampler_class()
        if problem is None and sampler_class is None:
            problem = (
                "the name DistributedSampler is bound to something else in this file"
            )
        check = self._is_initialized(loader) if problem is None else None
        if problem is None and check is None:
            problem = "the name `torch` is bound to something else here"
        if problem is not None:
            self.report(
                loader,
                f"shuffled DataLoader in DDP code has no DistributedSampler ({problem})",
                suggestion,
            )
            return
        self._rewrite(loader, statement, dataset.value, sampler_class, check)

    def _is_initialized(self, loader: cst.Call) -> str | None:
        found = is_initialized_call(self.ctx, loader)
        if found is None:
            return None
        code, needs_import = found
        if needs_import:
            self.add_import("torch.distributed")
        return code

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
        dataset: cst.BaseExpression,
        sampler_class: str,
        check: str,
    ) -> None:
        name, loader_expression = self._name_for(statement)
        dataset_code = self.ctx.module.code_for_node(dataset)
        new = cst.parse_statement(
            f"{name} = {sampler_class}({dataset_code}, shuffle=True) if {check} else None\n",
            config=self.ctx.module.config_for_parsing,
        )
        message = f"shard the shuffled loader with `{name}` when torch.distributed is initialized"
        # blank lines and comments above the loader now go above its sampler
        insert_above(self, statement, new, message, anchor=loader)
        self.replace(
            loader,
            lambda call: _with_sampler(call, name),
            f"`shuffle=True` -> `shuffle={name} is None, sampler={name}` (DistributedSampler shuffles per rank)",
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
                [set_epoch_statement(self.ctx, name, found.loop, f"{name} is not None")],
                f"`{name}.set_epoch(...)` so each epoch gets a new order",
                anchor=found.loop,
                needs_torch_npu=False,
            )
            return
        why = found.why if found is not None else "the loader is not assigned to a name"
        if loader_expression:
            # the sampler's name is local here; the loop may be elsewhere
            receiver = f"{loader_expression}.sampler"
            guard = f"isinstance({receiver}, {sampler_class})"
        else:
            receiver, guard = name, f"{name} is not None"
        self.report(
            loader,
            f"added a DistributedSampler, but cannot place its set_epoch call ({why})",
            f"add `{set_epoch_line(receiver, guard)}` as the first statement of the epoch loop",
        )


def _with_sampler(call: cst.Call, name: str) -> cst.Call:
    """``shuffle=True`` -> ``shuffle=<name> is None, sampler=<name>``: the DataLoader
    refuses ``shuffle=True`` together with a sampler, and shuffles itself when
    there is none (one process)."""
    args = list(call.args)
    index = next(
        i
        for i, a in enumerate(args)
        if a.keyword is not None and a.keyword.value == "shuffle"
    )
    shuffle = args[index]
    comma, after = shuffle.comma, shuffle.whitespace_after_arg
    if not isinstance(comma, cst.Comma) and index > 0:
        # the last argument: separate it like the others; what came before `)` follows sampler=
        comma, after = args[index - 1].comma, cst.SimpleWhitespace("")
    test = cst.Comparison(
        cst.Name(name), [cst.ComparisonTarget(cst.Is(), cst.Name("None"))]
    )
    args[index : index + 1] = [
        shuffle.with_changes(value=test, comma=comma, whitespace_after_arg=after),
        shuffle.with_changes(keyword=cst.Name("sampler"), value=cst.Name(name)),
    ]
    return call.with_changes(args=args)


def _classes(module: cst.Module) -> list[cst.ClassDef]:
    found: list[cst.ClassDef] = []

    class _Collect(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            found.append(node)

    module.visit(_Collect())
    return found
