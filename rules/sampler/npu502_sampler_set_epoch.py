"""NPU502: a DistributedSampler whose ``set_epoch`` is never called."""

from __future__ import annotations

import ast
import dataclasses

import libcst as cst
from npu_migrate.rules.checkpoint._common import dotted

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.rule import Example, Rule
from npu_migrate.python.set_epoch import adds_set_epoch

from ._common import (
    DATALOADERS,
    NEVER_CALLED,
    SAMPLERS,
    calls_set_epoch,
    find_epoch_loop,
    function_of,
    set_epoch_line,
    set_epoch_statement,
)


class SamplerSetEpoch(Rule):
    id = "NPU502"
    targets = ("npu", "cpu")
    name = "sampler-set-epoch"
    summary = (
        "Call `sampler.set_epoch(epoch)` for a DistributedSampler that never gets it"
    )
    triggers = ("DistributedSampler",)
    whole_file = True  # a sampler, its loader and the epoch loop live in different functions
    rationale = """
`DistributedSampler(shuffle=True)` seeds its permutation with `seed + epoch`,
and `epoch` only changes through `sampler.set_epoch(epoch)`. Without that
call every epoch sees the same order on every rank, which quietly hurts
convergence. (Census: 99 files build a DistributedSampler and 58 of them never
call `set_epoch` in the same file; usually the call is elsewhere in the
project.)

Because the epoch loop often lives in another file than the sampler, the
decision is made per project, from `ProjectFacts.calls_set_epoch` (a text scan
of every file for `.set_epoch(` on something other than a DistributedSampler that
file builds itself, done once before the per-file work: a call on a file's own
sampler, as NPU501/510/511 write one, says nothing of another file's):

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
  the sampler with the exact line to add, unless this run adds a `set_epoch`
  call elsewhere in the file (for another sampler, or NPU501's): the written
  file then calls it, and a second run must report what the first one did.

The call is guarded only when the sampler may be missing at run time, as in
scripts that also run in one process without a process group:

- plain `sampler.set_epoch(epoch)` when the name only ever holds
  DistributedSamplers;
- `if sampler is not None: sampler.set_epoch(epoch)` when it may also be None
  (`DistributedSampler(ds) if dist.is_initialized() else None`, or
  `sampler = None` before an `if` that builds it, in the same function; for
  an attribute such as `self.sampler`, anywhere in the file);
- `if isinstance(sampler, DistributedSampler): sampler.set_epoch(epoch)` when
  it may hold something else (another sampler, a parameter, a helper's result),
  and for `loader.sampler` when the loader was given
  `DistributedSampler(ds) if ... else None` inline (given None, the loader
  makes its own RandomSampler, which has no set_epoch).

A sampler name assigned only on some paths to the epoch loop (inside an `if`
branch, a loop or a `try` of its own, as ml-4m's `sampler_train` in the `else` of
`if args.use_wds:`) gets no call: it would be a NameError on the other path; the
finding gives the line to add. Samplers created with `shuffle=False` are left alone: their order does not
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
            "import torch.distributed as dist\n"
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(dataset) if dist.is_initialized() else None\n"
            "loader = DataLoader(dataset, shuffle=sampler is None, sampler=sampler)\n"
            "for epoch in range(epochs):\n"
            "    for batch in loader:\n"
            "        train_step(batch)\n",
            "import torch.distributed as dist\n"
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            "sampler = DistributedSampler(dataset) if dist.is_initialized() else None\n"
            "loader = DataLoader(dataset, shuffle=sampler is None, sampler=sampler)\n"
            "for epoch in range(epochs):\n"
            "    if sampler is not None:\n"
            "        sampler.set_epoch(epoch)\n"
            "    for batch in loader:\n"
            "        train_step(batch)\n",
        ),
        Example(
            "from torch.utils.data import DistributedSampler\n"
            "sampler = DistributedSampler(dataset, shuffle=False)\n"
        ),
        # bound only in the `else`: a call in the loop would be a NameError with webdatasets (reported)
        Example(
            "from torch.utils.data import DataLoader, DistributedSampler\n"
            "if args.use_wds:\n"
            "    loader = build_wds_loader(args)\n"
            "else:\n"
            "    sampler = DistributedSampler(dataset)\n"
            "    loader = DataLoader(dataset, batch_size=8, sampler=sampler)\n"
            "for epoch in range(epochs):\n"
            "    for batch in loader:\n"
            "        train_step(batch)\n"
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.samplers: list[cst.Call] = []
        self.loaders: list[cst.Call] = []
        self.fors: list[cst.For] = []
        # (loop, receiver) pairs already given a set_epoch call: two samplers bound
        # to the same name (`if cfg.x: sampler = DistributedSampler(...)`) need one
        self.placed: set[tuple[int, str]] = set()

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in SAMPLERS:
            self.samplers.append(node)
        elif qualified in DATALOADERS:
            self.loaders.append(node)

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def leave_file(self) -> None:
        if not self.samplers or calls_set_epoch(self.ctx.text):
            return
        unplaced: list[tuple[cst.Call, str, str]] = []
        for sampler in self.samplers:
            shuffle = call_arg(sampler, "shuffle", 3)
            if (
                shuffle is not None
                and isinstance(shuffle.value, cst.Name)
                and shuffle.value.value == "False"
            ):
                continue
            self._check(sampler, unplaced)
        # The written file will call `.set_epoch(` when this run adds a call (here or
        # NPU501): the next run leaves it alone, so this one says nothing either.
        if not any(adds_set_epoch(edit) for edit in self.ctx.edits):
            for sampler, message, suggestion in unplaced:
                self.report(sampler, message, suggestion)

    def _check(self, sampler: cst.Call, unplaced: list[tuple[cst.Call, str, str]]) -> None:
        # `x if cond else None`: the expression that holds the sampler, or None
        held, alternative = _held_by(self.ctx, sampler)
        name = self._bound_name(held)
        receiver, loader_name, loader_statement = name, None, None
        inline = False
        feeds: cst.Call | None = None
        for loader in self.loaders:
            arg = call_arg(loader, "sampler", 3)
            if arg is None:
                continue
            if arg.value is held or (name is not None and dotted(arg.value) == name):
                feeds = loader
                loader_name = self._bound_name(loader)
                loader_statement = self.ctx.enclosing_statement(loader)
                inline = arg.value is held
                if inline and loader_name is not None:
                    receiver = f"{loader_name}.sampler"
                break
        guard = None
        if receiver is not None:
            guard = self._guard(sampler, held, alternative, receiver, inline)
        why = "it feeds no DataLoader assigned to a name in this file"
        if loader_name is not None and receiver is not None:
            found = find_epoch_loop(self.ctx, self.fors, loader_name, loader_statement)
            if found.loop is not None and not _bound_before(self.ctx, receiver, found.loop):
                found = dataclasses.replace(found, loop=None, why=f"`{receiver}` is assigned only on some paths to the epoch loop, "
                                                       "so a call there could name a variable that does not exist")
            if found.loop is not None:
                if (id(found.loop), receiver) in self.placed:
                    return
                self.placed.add((id(found.loop), receiver))
                self.insert_before(
                    found.loop.body.body[0],
                    [set_epoch_statement(self.ctx, receiver, found.loop, guard)],
                    f"`{receiver}.set_epoch(...)` so each epoch gets a new order",
                    anchor=found.loop,
                )
                return
            why = found.why
        inserted = _as_npu501_inserts_it(self.ctx, held, alternative)
        if self.ctx.facts.calls_set_epoch and not inserted:
            return  # another file of the project calls set_epoch: most likely on this sampler
        shown = receiver or (f"{loader_name}.sampler" if loader_name else "sampler")
        unplaced.append((
            # on the DataLoader, where NPU501 reports it when it adds this sampler, so a
            # second run over the output reports it at the same place
            feeds if inserted and feeds is not None else sampler,
            NEVER_CALLED.format(why=why),
            f"add `{set_epoch_line(shown, guard)}` as the first statement of the epoch loop",
        ))

    def _guard(
        self,
        sampler: cst.Call,
        held: cst.CSTNode,
        alternative: cst.CSTNode | None,
        receiver: str,
        inline: bool,
    ) -> str | None:
        """None when ``receiver`` is always this DistributedSampler; ``receiver is not
        None`` when it may also be None (single-process runs); an isinstance test
        when it may be another sampler, or the DataLoader's default one."""
        if inline:
            # given None, the loader makes its own Random/SequentialSampler
            kinds = {"other"} if alternative is not None else set()
        else:
            kinds = {_kind(alternative)} if alternative is not None else set()
            kinds |= self._other_values(sampler, held, receiver)
        if "other" in kinds:
            klass = self.ctx.module.code_for_node(sampler.func)
            return f"isinstance({receiver}, {klass})"
        if "none" in kinds:
            return f"{receiver} is not None"
        return None

    def _other_values(
        self, sampler: cst.Call, held: cst.CSTNode, receiver: str
    ) -> set[str]:
        """What else the sampler's name is given: in its function for a plain name,
        anywhere in the file for an attribute (``self.sampler = None`` in __init__)."""
        home = function_of(self.ctx, sampler) if "." not in receiver else self.ctx.module
        kinds: set[str] = set()
        rules_self = self

        class _Values(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                # a plain name is local to its function; an attribute may be set anywhere
                return node is home or "." in receiver

            def visit_Lambda(self, node) -> bool:
                return False

            def visit_Param(self, node: cst.Param) -> None:
                if node.name.value == receiver:
                    kinds.add("other")  # whatever the caller passes

            def visit_Assign(self, node: cst.Assign) -> None:
                if node.value is held:
                    return
                for target in node.targets:
                    if dotted(target.target) == receiver:
                        kinds.add(_value_kind(node.value, rules_self))
                    elif _binds_in(target.target, receiver):
                        kinds.add("other")

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                if node.value is not held and dotted(node.target) == receiver:
                    kinds.add(
                        "none" if node.value is None else _value_kind(node.value, rules_self)
                    )

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                if dotted(node.target) == receiver:
                    kinds.add("other")

            def visit_For(self, node: cst.For) -> None:
                if _binds_in(node.target, receiver):
                    kinds.add("other")

            def visit_WithItem(self, node: cst.WithItem) -> None:
                if node.asname is not None and _binds_in(node.asname.name, receiver):
                    kinds.add("other")

            def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
                if dotted(node.target) == receiver:
                    kinds.add(_value_kind(node.value, rules_self))

        home.visit(_Values())
        return kinds

    def _bound_name(self, call: cst.CSTNode) -> str | None:
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


def _as_npu501_inserts_it(ctx, held: cst.CSTNode, alternative: cst.CSTNode | None) -> bool:
    """``DistributedSampler(...) if dist.is_initialized() else None``: the sampler NPU501
    adds, which no other file can be calling set_epoch on."""
    return (
        isinstance(held, cst.IfExp)
        and alternative is not None
        and _kind(alternative) == "none"
        and isinstance(held.test, cst.Call)
        and ctx.qualified_name(held.test.func) == "torch.distributed.is_initialized"
    )


def _held_by(ctx, sampler: cst.Call) -> tuple[cst.CSTNode, cst.CSTNode | None]:
    """The expression whose value is the sampler, and the other branch when that
    is a conditional expression (``DistributedSampler(ds) if dist.is_initialized() else None``)."""
    parent = ctx.parent(sampler)
    if isinstance(parent, cst.IfExp):
        if parent.body is sampler:
            return parent, parent.orelse
        if parent.orelse is sampler:
            return parent, parent.body
    return sampler, None


def _kind(node: cst.CSTNode) -> str:
    return "none" if isinstance(node, cst.Name) and node.value == "None" else "other"


def _value_kind(node: cst.CSTNode, rule: SamplerSetEpoch) -> str:
    """"none", "sampler" (another DistributedSampler, or a conditional of those and
    None) or "other"."""
    if isinstance(node, cst.Name) and node.value == "None":
        return "none"
    if isinstance(node, cst.Call) and rule.qualified_name(node.func) in SAMPLERS:
        return "sampler"
    if isinstance(node, cst.IfExp):
        kinds = {_value_kind(node.body, rule), _value_kind(node.orelse, rule)}
        return "other" if "other" in kinds else ("none" if "none" in kinds else "sampler")
    return "other"


def _binds_in(target: cst.CSTNode, name: str) -> bool:
    """``name`` is one of the names a tuple/list/starred target binds."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds_in(e.value, name) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _binds_in(target.value, name)
    return dotted(target) == name


def _bound_before(ctx, receiver: str, loop: cst.For) -> bool:
    """Whether a plain name ``receiver`` is assigned on every path to ``loop``: by a
    statement of the loop's own block, or of a ``with`` in it, before the loop (ml-4m's
    ``sampler_train`` exists only in the ``else`` of ``if args.use_wds:``, held-out
    round 21; a call added there raised NameError with webdatasets). Attributes and
    ``loader.sampler`` are not checked."""
    if not receiver.isidentifier():
        return True
    tree = ctx.python_ast()
    if tree is None:
        return True
    number = ctx.position(loop).start.line
    holder = None
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(isinstance(s, ast.For) and s.lineno == number for s in block):
                holder = block
    if holder is None:
        return True
    scope = tree
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.lineno <= number <= (node.end_lineno or node.lineno) and node.lineno > getattr(scope, "lineno", 0)):
            scope = node
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = scope.args
        if receiver in {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}:
            return True  # a parameter: bound on entry
    stores = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == receiver and isinstance(n.ctx, ast.Store)]
    if not stores:
        return True  # a global or a closure's name: not this function's to tell

    def binds(statements) -> bool:
        for statement in statements:
            if statement.lineno >= number:
                return False
            if isinstance(statement, (ast.With, ast.AsyncWith)) and binds(statement.body):
                return True
            targets = (statement.targets if isinstance(statement, ast.Assign)
                       else [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else [])
            if any(isinstance(n, ast.Name) and n.id == receiver for t in targets for n in ast.walk(t)):
                return True
        return False

    return binds(holder)

