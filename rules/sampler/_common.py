"""Helpers for the DistributedSampler rules: loaders, samplers and epoch loops."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.set_epoch import SET_EPOCH

DATALOADERS = frozenset(
    {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
)
SAMPLERS = frozenset(
    {
        "torch.utils.data.DistributedSampler",
        "torch.utils.data.distributed.DistributedSampler",
    }
)
DISTRIBUTED = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    }
)

#: calls that wrap a loader without changing what one pass over it means
WRAPPERS = frozenset(
    {"enumerate", "tqdm", "iter", "track", "progress_bar", "ProgressBar"}
)
#: The finding for a DistributedSampler whose set_epoch call is missing and cannot be
#: placed; NPU501 reports it under this id too, for the sampler it inserts.
SET_EPOCH_RULE = "NPU502"
NEVER_CALLED = "DistributedSampler.set_epoch is never called in this project, so every epoch repeats the same order ({why})"

_EPOCH = re.compile(r"epoch", re.IGNORECASE)
_SCOPE_BOUNDARY = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def function_of(ctx, node: cst.CSTNode) -> cst.CSTNode:
    """The innermost function, class body or lambda around ``node``, else the module."""
    return next(
        (a for a in ctx.ancestors(node) if isinstance(a, _SCOPE_BOUNDARY)), ctx.module
    )


def iterates(node: cst.CSTNode, loader: str) -> bool:
    """``loader``, ``enumerate(loader)``, ``tqdm(enumerate(loader), ...)``..."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return cst.helpers.get_full_name_for_node(node) == loader
    if isinstance(node, cst.Call):
        name = cst.helpers.get_full_name_for_node(node.func) or ""
        if name.rsplit(".", 1)[-1] not in WRAPPERS:
            return False
        first = call_arg(node, None, 0)
        return first is not None and iterates(first.value, loader)
    return False


def is_range_loop(loop: cst.For) -> bool:
    it = loop.iter
    if isinstance(it, cst.Call) and isinstance(it.func, (cst.Name, cst.Attribute)):
        name = (cst.helpers.get_full_name_for_node(it.func) or "").rsplit(".", 1)[-1]
        if name == "range" or name == "trange":
            return True
        if name == "tqdm":  # tqdm(range(...))
            first = call_arg(it, None, 0)
            return (
                first is not None
                and isinstance(first.value, cst.Call)
                and is_range_loop(loop.with_changes(iter=first.value))
            )
    return False


@dataclass
class EpochLoop:
    loop: cst.For | None
    why: str  # when loop is None


def find_epoch_loop(
    ctx, fors: list[cst.For], loader: str, created_at: cst.CSTNode
) -> EpochLoop:
    """The ``for <epoch> in range(...)`` loop, in the same function as ``created_at``
    and after it, that runs one pass over ``loader`` per iteration: its body holds
    ``for ... in loader`` (possibly through enumerate/tqdm), or, when the loop
    variable is called ``*epoch*``, passes ``loader`` to a call or calls a
    module-level function of this file that iterates over ``loader``, a global
    (``for epoch in ...: train(epoch)``)."""
    home = function_of(ctx, created_at)
    helpers = _functions_iterating(ctx.module, loader) if home is ctx.module else frozenset()
    start = ctx.position(created_at).end.line
    candidates: list[cst.For] = []
    for loop in fors:
        if function_of(ctx, loop) is not home or not is_range_loop(loop):
            continue
        if ctx.position(loop).start.line <= start or any(
            a is loop for a in ctx.ancestors(created_at)
        ):
            continue
        if _uses_loader(loop, loader, bool(_EPOCH.search(_target(loop) or "")), helpers):
            candidates.append(loop)
    # the outermost loops: an inner range loop inside an epoch loop is a step loop
    outer = [
        c for c in candidates if not any(a in candidates for a in ctx.ancestors(c))
    ]
    if not outer:
        return EpochLoop(
            None,
            f"no `for epoch in range(...)` loop over `{loader}` found after it in the same function",
        )
    if len(outer) > 1:
        return EpochLoop(None, f"several epoch loops iterate over `{loader}`")
    loop = outer[0]
    target = _target(loop)
    if target is None or target == "_":
        return EpochLoop(None, "the epoch loop has no usable loop variable")
    if not isinstance(loop.body, cst.IndentedBlock):
        return EpochLoop(None, "the epoch loop body is on the same line")
    return EpochLoop(loop, "")


def _target(loop: cst.For) -> str | None:
    return loop.target.value if isinstance(loop.target, cst.Name) else None


def _functions_iterating(module: cst.Module, loader: str) -> frozenset[str]:
    """Names of the module-level functions whose body iterates over the global ``loader``."""
    names = set()
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            probe = cst.For(target=cst.Name("_"), iter=cst.Name("_"), body=statement.body)
            if _uses_loader(probe, loader, False):
                names.add(statement.name.value)
    return frozenset(names)


def _uses_loader(loop: cst.For, loader: str, epoch_named: bool, helpers: frozenset[str] = frozenset()) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node) -> bool:
            return False

        def visit_ClassDef(self, node) -> bool:
            return False

        def visit_Lambda(self, node) -> bool:
            return False

        def visit_For(self, node: cst.For) -> bool:
            nonlocal found
            if iterates(node.iter, loader):
                found = True
            return not found

        def visit_Arg(self, node: cst.Arg) -> bool:
            nonlocal found
            if epoch_named and iterates(node.value, loader):
                found = True
            return not found

        def visit_Call(self, node: cst.Call) -> bool:
            nonlocal found
            if epoch_named and isinstance(node.func, cst.Name) and node.func.value in helpers:
                found = True
            return not found

    loop.body.visit(_Find())
    return found


def set_epoch_statement(
    ctx, receiver: str, loop: cst.For, guard: str | None = None
) -> cst.BaseStatement:
    """``receiver.set_epoch(<loop variable>)``, under ``if guard:`` when given."""
    call = f"{receiver}.set_epoch({_target(loop)})\n"
    if guard is not None:
        call = f"if {guard}:\n{ctx.module.default_indent}{call}"
    return cst.parse_statement(call, config=ctx.module.config_for_parsing)


def set_epoch_line(receiver: str, guard: str | None) -> str:
    """The same statement on one line, for suggestions."""
    call = f"{receiver}.set_epoch(epoch)"
    return call if guard is None else f"if {guard}: {call}"


def _imported_here(ctx, scope, local: str) -> bool:
    """``local`` is bound only by import statements where ``scope`` reads it, and not
    only by the torch_npu guard's ``except`` body (its ``import torch`` runs only where
    torch_npu is missing: on Ascend the name is unbound, so a second run must not build
    on it; a mix of fixtures found that)."""
    if local in ctx.imports.conflicting:
        return False
    if scope is None:
        return True
    assignments = scope[local]
    return bool(assignments) and all(
        isinstance(a.node, (cst.Import, cst.ImportFrom)) for a in assignments
    ) and not all(_in_guard_fallback(ctx, a.node) for a in assignments)


def _in_guard_fallback(ctx, node: cst.CSTNode) -> bool:
    """``node`` sits in the ``except`` body of a ``try: import torch_npu``."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.ExceptHandler):
            owner = ctx.parent(ancestor)
            return isinstance(owner, cst.Try) and "import torch_npu" in ctx.module.code_for_node(owner.body)
    return False


def is_initialized_call(ctx, at: cst.CSTNode) -> tuple[str, bool] | None:
    """Code that calls ``torch.distributed.is_initialized()`` where ``at`` is, and
    whether ``import torch.distributed`` must be added for it; None when ``torch``
    means something else there.

    The file's own spelling wins: ``dist.is_initialized()`` for
    ``import torch.distributed as dist`` / ``from torch import distributed as dist``,
    ``is_initialized()`` when imported by name, ``torch.distributed.is_initialized()``
    when ``torch`` (or an alias of it) is imported."""
    bindings = ctx.imports.bindings
    scope = ctx.scope(at)
    for wanted, template in (
        ("torch.distributed", "{}.is_initialized()"),
        ("torch.distributed.is_initialized", "{}()"),
        ("torch", "{}.distributed.is_initialized()"),
    ):
        for local, qualified in bindings.items():
            if qualified == wanted and _imported_here(ctx, scope, local):
                return template.format(local), False
    if "torch" in bindings or (scope is not None and "torch" in scope):
        return None
    return "torch.distributed.is_initialized()", True


def calls_set_epoch(text: str) -> bool:
    """The file calls ``.set_epoch(`` somewhere (NPU502 then trusts it)."""
    return SET_EPOCH.search(text) is not None
