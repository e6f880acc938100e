"""Giving a shuffled DataLoader a DistributedSampler (and its ``set_epoch``).

Shared by NPU501 (DDP code whose loader has no sampler) and the data-parallel
rules (NPU510 ``nn.DataParallel`` -> DDP, NPU511 single device -> DDP), which also
divide the loader's batch by the world size (``npu_runtime.per_process_batch_size``)
so that the global batch stays what the script was tuned for.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst
from npu_migrate.rules.checkpoint._common import dotted, insert_above, is_pure_reference

from npu_migrate.python.cst_util import call_arg, find_all
from npu_migrate.python.rule import Rule
from npu_migrate.python.set_epoch import adds_set_epoch

from ._common import (
    NEVER_CALLED,
    SAMPLERS,
    SET_EPOCH_RULE,
    calls_set_epoch,
    find_epoch_loop,
    is_initialized_call,
    set_epoch_line,
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
SUGGESTION = (
    "sampler = DistributedSampler(dataset, shuffle=True) if dist.is_initialized() else None; "
    "pass `shuffle=sampler is None, sampler=sampler` to the loader, and start every epoch with "
    "`if sampler is not None: sampler.set_epoch(epoch)`"
)
PER_PROCESS_BATCH = "npu_runtime.per_process_batch_size"


class LoaderSharding:
    """Decides, for one rule and one file, which loaders get a sampler, and records the edits.

    ``where`` completes the finding "shuffled DataLoader in <where> has no
    DistributedSampler"; ``built_too_early(statement)`` says why the process group
    may not exist yet where the loader is built (None: it does);
    ``per_process_batch`` divides the loader's ``batch_size`` by the world size.
    """

    def __init__(
        self,
        rule: Rule,
        fors: list[cst.For],
        *,
        where: str,
        built_too_early: Callable[[cst.CSTNode], str | None],
        per_process_batch: bool = False,
    ) -> None:
        self.rule = rule
        self.ctx = rule.ctx
        self.fors = fors
        self.where = where
        self.built_too_early = built_too_early
        self.per_process_batch = per_process_batch
        self.taken: set[str] = set()
        #: NPU502's finding for loaders whose epoch loop was not found (see :meth:`finish`)
        self.unplaced: list[tuple[cst.Call, str, str]] = []

    def shard(self, loader: cst.Call) -> bool:
        """Give ``loader`` a sampler if it needs one; True when it was rewritten."""
        shuffle = call_arg(loader, "shuffle", 2)
        if shuffle is None or any(a.star == "*" for a in loader.args):
            return False
        if (
            call_arg(loader, "sampler", 3) is not None
            or call_arg(loader, "batch_sampler", 4) is not None
        ):
            return False
        value = shuffle.value
        if isinstance(value, cst.Name) and value.value in ("False", "None"):
            return False
        literal_true = isinstance(value, cst.Name) and value.value == "True"
        dataset = call_arg(loader, "dataset", 0)
        if dataset is not None and self._iterable_dataset(dataset.value):
            return False
        suggestion = SUGGESTION
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
        if problem is None:
            problem = self.built_too_early(statement)
            if problem is not None:
                suggestion = "build the loader after the process group is initialised; then " + suggestion
        sampler_class = self._sampler_class()
        if problem is None and sampler_class is None:
            problem = (
                "the name DistributedSampler is bound to something else in this file"
            )
        check = self._is_initialized(loader) if problem is None else None
        if problem is None and check is None:
            problem = "the name `torch` is bound to something else here"
        if problem is not None:
            self.rule.report(
                loader,
                f"shuffled DataLoader in {self.where} has no DistributedSampler ({problem})",
                suggestion,
            )
            return False
        self._rewrite(loader, statement, dataset.value, sampler_class, check)
        return True

    def _is_initialized(self, loader: cst.Call) -> str | None:
        found = is_initialized_call(self.ctx, loader)
        if found is None:
            return None
        code, needs_import = found
        if needs_import:
            self.rule.add_import("torch.distributed")
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
            found = self.ctx.assignments(node, node.value)
            assignments = list(found) if found is not None else []
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
        rule = self.rule
        name, loader_expression = self._name_for(statement)
        dataset_code = self.ctx.module.code_for_node(dataset)
        new = cst.parse_statement(
            f"{name} = {sampler_class}({dataset_code}, shuffle=True) if {check} else None\n",
            config=self.ctx.module.config_for_parsing,
        )
        message = f"shard the shuffled loader with `{name}` when torch.distributed is initialized"
        # blank lines and comments above the loader now go above its sampler
        insert_above(rule, statement, new, message, anchor=loader)
        rule.replace(
            loader,
            lambda call: _with_sampler(call, name),
            f"`shuffle=True` -> `shuffle={name} is None, sampler={name}` (DistributedSampler shuffles per rank)",
            needs_torch_npu=False,
        )
        batch = call_arg(loader, "batch_size", 1) if self.per_process_batch else None
        if batch is not None:
            rule.replace(
                batch.value,
                lambda value: _per_process(value, name),
                f"each process loads its share of the batch (`{PER_PROCESS_BATCH}`), so the global batch stays the same",
                needs_torch_npu=False,
            )
            rule.add_import("npu_runtime")
        if (
            sampler_class == "DistributedSampler"
            and "DistributedSampler" not in self.ctx.imports.bindings
        ):
            rule.add_import("torch.utils.data.distributed", "DistributedSampler")
        found = (
            find_epoch_loop(self.ctx, self.fors, loader_expression, statement)
            if loader_expression
            else None
        )
        if found is not None and found.loop is not None:
            rule.insert_before(
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
        self.unplaced.append((
            loader,
            NEVER_CALLED.format(why=why),
            f"add `{set_epoch_line(receiver, guard)}` as the first statement of the epoch loop",
        ))

    def finish(self) -> None:
        """Report the loaders whose sampler gets no set_epoch, once every loader is done.
        Reported as NPU502 reports them, so a second run over the output (where the
        samplers exist and NPU502 finds them) reports the same; and, like NPU502, not in
        a file that calls set_epoch somewhere or is given a call by this run."""
        if calls_set_epoch(self.ctx.text) or any(adds_set_epoch(edit) for edit in self.ctx.edits):
            return
        for loader, message, suggestion in self.unplaced:
            self.ctx.record_finding(SET_EPOCH_RULE, loader, message, suggestion)


def _per_process(value: cst.BaseExpression, sampler: str) -> cst.Call:
    """``<batch>`` -> ``npu_runtime.per_process_batch_size(<batch>, <sampler>)``."""
    return cst.Call(
        func=cst.parse_expression(PER_PROCESS_BATCH),
        args=[
            cst.Arg(value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(cst.Name(sampler)),
        ],
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
    return find_all(module, cst.ClassDef)
