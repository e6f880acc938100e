"""NPU401: checkpoints of AMP training must carry the GradScaler state."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from npu_migrate.python.cst_util import call_arg, find_all
from npu_migrate.python.rule import Example, Rule

from ._common import dotted, insert_above, insert_item, is_pure_reference
from ._flow import (
    block_body,
    child_in,
    index_in,
    inside,
    reaching_assign,
    single_assign,
)

#: GradScaler constructors, before and after the AMP rules rewrote them
SCALER_CLASSES = frozenset(
    {
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.npu.amp.GradScaler",
        "torch_npu.npu.amp.GradScaler",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
    }
)

_OPTIMIZER = re.compile(r"optim", re.IGNORECASE)
_SCALER = re.compile(r"scaler", re.IGNORECASE)
_OPTIMIZER_KEY = re.compile(r"^(?:optimizer|optim|opt)(_state_dict|_state|_sd)?$")
#: modules whose classes are optimizers (receivers of ``.state_dict()`` bound to them
#: count as optimizers whatever they are called)
_OPTIMIZER_MODULES = (
    "torch.optim.",
    "torch_npu.optim.",
    "apex.optimizers.",
    "timm.optim.",
)


def scaler_key(optimizer_key: str | None) -> str:
    """``optimizer`` -> ``scaler``, ``optimizer_state_dict`` -> ``scaler_state_dict``:
    the save and the load derive the same key from their optimizer key."""
    match = _OPTIMIZER_KEY.match(optimizer_key or "")
    return f"scaler{match.group(1) or ''}" if match else "scaler"


@dataclass
class _Scaler:
    expression: str  # `scaler`, `self.scaler`
    optional: bool  # assigned from `GradScaler() if amp else None`


def _is_state_dict_call(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "state_dict"
        and not node.args
    )


def _looks_like_optimizer(key: str | None, receiver: str | None) -> bool:
    """By name: a key or receiver containing ``optim``, or a key ``opt``/``opt_state``."""
    return bool(
        _OPTIMIZER.search(key or "")
        or _OPTIMIZER.search(receiver or "")
        or _OPTIMIZER_KEY.match(key or "")
    )


def _is_optimizer_class(qualified: str | None) -> bool:
    return (
        bool(qualified)
        and qualified.startswith(_OPTIMIZER_MODULES)
        and not any(part in qualified for part in (".lr_scheduler", ".swa_utils"))
    )


class ScalerCheckpointState(Rule):
    id = "NPU401"
    targets = ("npu", "cpu")
    name = "scaler-checkpoint-state"
    summary = "Save and restore the GradScaler state next to the optimizer state in checkpoints"
    triggers = (
        ("GradScaler", "state_dict"),
        ("GradScaler", "load_state_dict"),
        ("ShardedGradScaler", "state_dict"),
        ("ShardedGradScaler", "load_state_dict"),
    )
    whole_file = True  # follows objects across functions
    rationale = """
A GradScaler carries state that training depends on: the current loss scale
and the count of steps since it last grew. A checkpoint that stores the
optimizer but not the scaler restarts after every resume at the initial scale
(65536 by default), which on fp16 means a burst of overflowing, skipped steps,
and a loss curve that no longer matches an uninterrupted run. Resumes are
routine on shared Ascend clusters (preemption, node faults), so the scaler
state is worth saving. (Census: in files with a GradScaler, 37 checkpoint
dicts lack scaler state and 19 include it.)

In a file that creates a GradScaler (`torch.cuda.amp.GradScaler(...)`,
`torch.amp.GradScaler(...)`, the `torch.npu.amp` form, `ShardedGradScaler`, in
any import form, so it works before and after the AMP rules rewrote the
constructor):

- **Which state is the optimizer's**: `<x>.state_dict()` where `<x>` is
  what a scaler steps or unscales in this file (`scaler.step(opt)`), a name
  bound to a `torch.optim.X(...)` (or `torch_npu.optim`, apex, timm) call, or
  a key or receiver that says so (`optim...`, key `opt`/`opt_state`). So
  `opt`, `solver_g` and `self.sgd` are optimizers; an `opt = parse_args()`
  saved as `vars(opt)` is not.
- **Save**: a `torch.save` of a dict that holds optimizer state and nothing
  about a scaler gets `"scaler": <scaler>.state_dict()` right after the first
  optimizer entry. Dict forms: a literal passed directly, `dict(epoch=...,
  optimizer=...)` (passed directly or through a name), a name bound to a
  literal (`state = {...}; torch.save(state, path)`), and a dict filled by
  `state["optimizer"] = opt.state_dict()` (then `state["scaler"] =
  scaler.state_dict()` is added after that line). A name is followed back
  from the save through the statements before it and the `if`/`with`/loop/`try`
  blocks around it to the `name = {...}` it holds there, so a module-level
  script that also binds `checkpoint` to a `torch.load` result and to None
  elsewhere is handled; a loop that rebinds the name after the save is
  reported. One dict saved by several `torch.save` calls (yolov5 writes the
  same `ckpt` to last.pt, best.pt and an epoch file) gets the key once.
- **Load**: `<optimizer>.load_state_dict(ckpt[KEY])` on a line of its own gets
  `if "scaler" in ckpt:` / `scaler.load_state_dict(ckpt["scaler"])` right
  after it. The guard keeps old checkpoints (without the key) loadable. One
  restore per function: a GAN that loads two optimizers restores the scaler
  once.
- **Load before the scaler exists** (auto-resume code that reads the
  checkpoint first and creates the GradScaler later in the same function):
  the restore goes right after the GradScaler is created, where the
  checkpoint variable still holds the checkpoint. Loaded in the same block:
  `if "scaler" in ckpt:`. Loaded inside an `if` (resume only when a
  checkpoint file exists): `ckpt = None` is inserted before that `if`, under
  its comment, and the restore tests `ckpt is not None and "scaler" in ckpt`
  (an existing `ckpt = None` before it is reused), so a fresh start does not
  hit an unbound name. Reported instead, with the place to restore it, when
  the name is rebound or deleted before the scaler exists (`ckpt = None  #
  free memory`), bound to something else before, or when the GradScaler is
  created in another block.
- The key mirrors the optimizer key: `optimizer_state_dict` gives
  `scaler_state_dict`, anything else gives `scaler`, so a save and a load
  that use the same optimizer key agree. Quotes follow the optimizer key.

**"In scope"** (decided with libcst's ScopeProvider): a name is the scaler at a
site when every binding of that name visible there is an assignment of a
GradScaler constructor call, and, in the same scope, that assignment comes
first (a module-level `scaler` read inside a function counts). `self.<attr>`
counts inside a method of the class whose methods assign `self.<attr>` only
from GradScaler constructors. A parameter called `scaler` is *not* assumed to
be one (the rule does not guess from names).

Reported, not rewritten (with the exact lines to add): the scaler is not in
scope at the save or load site (a `save_checkpoint(model, optimizer, ...)`
helper: pass the GradScaler to it), several scalers are in scope, the scaler may be None
(`GradScaler() if amp else None`), the dict has `**` entries, or the load is
not a statement of its own. Also reported: optimizer state saved in something
that is not a dict the rule can follow (a dataclass snapshot saved with
`asdict(...)`, `torch.save(optimizer.state_dict(), path)`, a name a loop
rebinds) when the function says nothing about a scaler (optimizer state that
goes into a dict another save of the function saves by name is that save's: a
`torch.save(model, path)` beside it is not reported), and an optimizer
restored from something other than `ckpt["key"]` (`snapshot.optimizer_state`). Already handled, so left alone: a dict with any
key or value mentioning `scaler`, and a function that already calls
`<...scaler...>.load_state_dict`.

Note: a checkpoint saved with `GradScaler(enabled=False)` holds an empty
scaler state, and loading it into an *enabled* scaler raises; resume with the
same AMP setting, or change the guard to `if ckpt.get("scaler"):`.
"""
    examples = (
        Example(
            "import torch\n"
            "scaler = torch.cuda.amp.GradScaler()\n"
            'torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)\n',
            "import torch\n"
            "scaler = torch.cuda.amp.GradScaler()\n"
            'torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, path)\n',
        ),
        Example(
            "import torch\n"
            'scaler = torch.amp.GradScaler("npu")\n'
            'ckpt = torch.load(path, map_location="cpu")\n'
            'optimizer.load_state_dict(ckpt["optimizer"])\n',
            "import torch\n"
            'scaler = torch.amp.GradScaler("npu")\n'
            'ckpt = torch.load(path, map_location="cpu")\n'
            'optimizer.load_state_dict(ckpt["optimizer"])\n'
            'if "scaler" in ckpt:\n'
            '    scaler.load_state_dict(ckpt["scaler"])\n',
        ),
        Example(
            "import torch\n"
            "def main(args, optimizer):\n"
            "    if args.resume:\n"
            '        ckpt = torch.load(args.resume, map_location="cpu")\n'
            '        optimizer.load_state_dict(ckpt["optimizer"])\n'
            '    scaler = torch.amp.GradScaler("npu")\n',
            "import torch\n"
            "def main(args, optimizer):\n"
            "    ckpt = None\n"
            "    if args.resume:\n"
            '        ckpt = torch.load(args.resume, map_location="cpu")\n'
            '        optimizer.load_state_dict(ckpt["optimizer"])\n'
            '    scaler = torch.amp.GradScaler("npu")\n'
            '    if ckpt is not None and "scaler" in ckpt:\n'
            '        scaler.load_state_dict(ckpt["scaler"])\n',
        ),
        Example(
            "import torch\n"
            "scaler = torch.cuda.amp.GradScaler()\n"
            'torch.save({"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}, path)\n'
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.creations: list[cst.Call] = []
        self.saves: list[cst.Call] = []
        self.loads: list[cst.Call] = []
        self.attribute_assigns: list[
            tuple[cst.Attribute, cst.BaseExpression | None]
        ] = []
        self.steps: list[cst.Call] = []  # `<x>.step(<y>)` / `<x>.unscale_(<y>)`
        self.optimizer_names: set[str] = set()  # bound to a torch.optim.X(...) call
        self.restored: set[cst.CSTNode | None] = set()  # functions given a restore
        self.state_dicts: list[cst.Call] = []  # every `<x>.state_dict()`
        # dicts (literal, dict(...) call or the store statement) already given the scaler
        # key: one dict saved by several torch.save calls (yolov5's last/best/epoch files)
        # gets it once, not once per save
        self.extended: set[cst.CSTNode] = set()

    # -- collection ------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            self.loads.append(node)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in ("step", "unscale_"):
            self.steps.append(node)
            return
        if _is_state_dict_call(node):
            self.state_dicts.append(node)
            return
        qualified = self.qualified_name(func)
        if qualified in SCALER_CLASSES:
            self.creations.append(node)
        elif qualified in ("torch.save", "torch.serialization.save"):
            self.saves.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and _is_optimizer_class(
            self.qualified_name(node.value.func)
        ):
            self.optimizer_names.update(
                filter(None, (dotted(t.target) for t in node.targets))
            )
        for target in node.targets:
            if isinstance(target.target, cst.Attribute) and isinstance(
                target.target.value, cst.Name
            ):
                self.attribute_assigns.append(
                    (target.target, node.value if len(node.targets) == 1 else None)
                )

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Attribute) and isinstance(
            node.target.value, cst.Name
        ):
            self.attribute_assigns.append((node.target, node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Attribute) and isinstance(
            node.target.value, cst.Name
        ):
            self.attribute_assigns.append((node.target, None))

    # -- decisions ---------------------------------------------------------------------

    def leave_file(self) -> None:
        if not self.creations or not (self.saves or self.loads):
            return
        self._index_scalers()
        self._index_optimizers()
        for save in self.saves:
            self._check_save(save)
        for load in self.loads:
            self._check_load(load)

    def _creation_kind(self, value: cst.CSTNode | None) -> str | None:
        """'sure' for a GradScaler constructor call, 'optional' for a conditional
        expression with one in a branch, else None."""
        if value is None:
            return None
        if isinstance(value, cst.Call) and value in self._creation_set:
            return "sure"
        if isinstance(value, cst.IfExp) and (
            self._creation_kind(value.body) or self._creation_kind(value.orelse)
        ):
            return "optional"
        return None

    def _index_scalers(self) -> None:
        self._creation_set = set(self.creations)
        # Name targets bound to a GradScaler: target node -> optional?
        self.name_targets: dict[cst.Name, bool] = {}
        self.names: set[str] = set()
        for call in self.creations:
            value: cst.CSTNode = call
            parent = self.ctx.parent(call)
            while isinstance(parent, cst.IfExp):
                value, parent = parent, self.ctx.parent(parent)
            if (
                isinstance(parent, (cst.Assign, cst.AnnAssign))
                and parent.value is value
            ):
                for target in _targets(parent):
                    if isinstance(target, cst.Name):
                        self.name_targets[target] = (
                            self._creation_kind(value) == "optional"
                        )
                        self.names.add(target.value)
        # self.<attr> scalers per class: (class, attr) -> optional?, or None when
        # some method of the class also assigns it something else
        kinds: dict[tuple[cst.ClassDef, str], list[str | None]] = {}
        for target, value in self.attribute_assigns:
            method = self._method_of(target)
            if method is not None and target.value.value == method[1]:
                kinds.setdefault((method[0], target.attr.value), []).append(
                    self._creation_kind(value)
                )
        self.attributes: dict[tuple[cst.ClassDef, str], bool | None] = {
            key: (None if None in found else "optional" in found)
            for key, found in kinds.items()
            if any(kind is not None for kind in found)
        }

    def _index_optimizers(self) -> None:
        """Receivers known to be optimizers whatever their name: what a scaler steps
        or unscales (`scaler.step(opt)`), and names bound to `torch.optim.X(...)`."""
        scaler_attrs = {attr for _, attr in self.attributes}
        self.optimizers = set(self.optimizer_names)
        for call in self.steps:
            receiver = call.func.value
            is_scaler = (
                isinstance(receiver, cst.Name) and receiver.value in self.names
            ) or (
                isinstance(receiver, cst.Attribute)
                and receiver.attr.value in scaler_attrs
            )
            positional = [a for a in call.args if a.keyword is None and not a.star]
            if is_scaler and positional and dotted(positional[0].value):
                self.optimizers.add(dotted(positional[0].value))

    def _is_optimizer_state(self, key: str | None, value: cst.CSTNode) -> bool:
        if not _is_state_dict_call(value):
            return False
        receiver = dotted(value.func.value)
        return receiver in self.optimizers or _looks_like_optimizer(key, receiver)

    def _method_of(self, node: cst.CSTNode) -> tuple[cst.ClassDef, str] | None:
        """(class, name of the first parameter) when ``node`` sits directly in a method."""
        function = next(
            (
                a
                for a in self.ctx.ancestors(node)
                if isinstance(a, (cst.FunctionDef, cst.Lambda))
            ),
            None,
        )
        if not isinstance(function, cst.FunctionDef):
            return None
        block = self.ctx.parent(function)
        klass = self.ctx.parent(block) if block is not None else None
        if not isinstance(klass, cst.ClassDef) or not function.params.params:
            return None
        if any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
            for d in function.decorators
        ):
            return None
        return klass, function.params.params[0].name.value

    def _scalers_at(self, site: cst.CSTNode) -> list[_Scaler]:
        found: list[_Scaler] = []
        if self.names:
            scope = self.ctx.scope(site)
            if scope is not None:
                for name in sorted(self.names):
                    scaler = self._name_scaler(scope, name, site)
                    if scaler is not None:
                        found.append(scaler)
        method = self._method_of(site)
        if method is not None:
            klass, receiver = method
            for (owner, attr), optional in sorted(
                self.attributes.items(), key=lambda kv: kv[0][1]
            ):
                if owner is klass and optional is not None:
                    found.append(_Scaler(f"{receiver}.{attr}", optional))
        return found

    def _name_scaler(self, scope, name: str, site: cst.CSTNode) -> _Scaler | None:
        assignments = list(scope[name])
        if not assignments:
            return None
        optional = False
        for assignment in assignments:
            node = getattr(assignment, "node", None)
            if node not in self.name_targets:
                return None
            if (
                assignment.scope is scope
                and self.ctx.position(node).start.line
                >= self.ctx.position(site).start.line
            ):
                return None  # assigned only after the site in the same scope
            optional = optional or self.name_targets[node]
        return _Scaler(name, optional)

    def _pick(self, site: cst.CSTNode) -> tuple[_Scaler | None, str]:
        """The scaler to use at ``site``, else None and why (``self._hint`` then holds
        a possibly-None scaler for the suggestion)."""
        scalers = self._scalers_at(site)
        self._hint = scalers[0] if len(scalers) == 1 else None
        if len(scalers) == 1 and not scalers[0].optional:
            return scalers[0], ""
        if len(scalers) > 1:
            return None, "several GradScalers are in scope here: " + ", ".join(
                s.expression for s in scalers
            )
        if scalers:
            return (
                None,
                f"`{scalers[0].expression}` may be None here (conditional GradScaler)",
            )
        return None, "the file creates a GradScaler, but none is in scope here"

    # -- save --------------------------------------------------------------------------

    def _check_save(self, save: cst.Call) -> None:
        arg = call_arg(save, "obj", 0)
        if arg is None:
            return
        value = arg.value
        if isinstance(value, cst.Dict):
            self._save_literal(save, value)
        elif _is_dict_call(value):
            self._save_dict_call(save, value)
        elif not (isinstance(value, cst.Name) and self._save_name(save, value)):
            self._save_other(save, value)

    def _save_other(self, save: cst.Call, value: cst.CSTNode) -> None:
        """A save whose object is not a dict the rule can follow (a dataclass snapshot,
        `asdict(...)`, the optimizer's state on its own): reported when optimizer state
        goes into it and the function never takes the scaler's state."""
        if _is_state_dict_call(value):
            if not self._is_optimizer_state(None, value):
                return
            source = value
        else:
            function = _function_of(self.ctx, save)
            others = [
                s
                for s in self.saves
                if s is not save and _function_of(self.ctx, s) is function
            ]
            source = next(
                (
                    call
                    for call in self.state_dicts
                    if _function_of(self.ctx, call) is function
                    and self._is_optimizer_state(self._key_of(call), call)
                    and self._kept(call, function)
                    and not any(self._saved_by(call, other) for other in others)
                ),
                None,
            )
            if source is None:
                return
        function = _function_of(self.ctx, save)
        if any(
            _SCALER.search(dotted(call.func.value) or "")
            and _function_of(self.ctx, call) is function
            for call in self.state_dicts
        ):
            return  # the function takes the scaler's state somewhere
        hint = self._scalers_at(save)
        expression = hint[0].expression if len(hint) == 1 else "scaler"
        # Line numbers go in the suggestion: a message must read the same on a second
        # run over the migrated file, where lines have moved.
        self.report(
            save,
            "checkpoint holds optimizer state but not the GradScaler state",
            f"save `{expression}.state_dict()` next to the optimizer state (line "
            f"{self.ctx.position(source).start.line}; pass the GradScaler here if needed) and "
            f"restore it on resume with `{expression}.load_state_dict(...)`",
        )

    def _kept(self, call: cst.Call, function: cst.FunctionDef | None) -> bool:
        """The state can reach a save: it is not read on the spot
        (``optimizer.state_dict()["param_groups"][0]["lr"]``), nor bound to a name that
        nothing else in the function reads (``opt = optimizer.state_dict()`` left unused)."""
        parent = self.ctx.parent(call)
        if isinstance(parent, (cst.Subscript, cst.Attribute)) and parent.value is call:
            return False
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return True
        target = parent.targets[0].target
        scope = function if function is not None else self.ctx.module
        return any(node.value == target.value and node is not target for node in find_all(scope, cst.Name))

    def _saved_by(self, call: cst.Call, save: cst.Call) -> bool:
        """``call`` goes into what ``save`` saves, as far as the rule follows it: it is
        written in the save itself, or in the statement that binds or fills the dict
        saved by name (`ckpt = {...}`, `ckpt["optimizer"] = ...`). Such optimizer state
        is that save's business, not that of a `torch.save(model, path)` beside it."""
        if inside(self.ctx, call, save):
            return True
        arg = call_arg(save, "obj", 0)
        if arg is None or not isinstance(arg.value, cst.Name):
            return False
        assign = next(
            (
                a
                for a in self.ctx.ancestors(call)
                if isinstance(a, (cst.Assign, cst.AnnAssign))
            ),
            None,
        )
        if assign is None:
            return False
        for target in _targets(assign):
            if isinstance(target, cst.Subscript):
                target = target.value
            if isinstance(target, cst.Name) and target.value == arg.value.value:
                return True
        return False

    def _key_of(self, value: cst.CSTNode) -> str | None:
        """The key ``value`` is stored under: ``{"optimizer": value}``,
        ``dict(optimizer=value)``, ``state["optimizer"] = value``."""
        parent = self.ctx.parent(value)
        if isinstance(parent, cst.DictElement) and parent.value is value:
            return _key(parent.key)
        if isinstance(parent, cst.Arg) and parent.keyword is not None:
            return parent.keyword.value
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Subscript):
                return _subscript_key(target)
        return None

    def _save_literal(self, save: cst.Call, literal: cst.Dict) -> None:
        if literal in self.extended:
            return
        entries: list[tuple[str | None, cst.CSTNode]] = []
        has_spread = False
        for element in literal.elements:
            if isinstance(element, cst.StarredDictElement):
                has_spread = True
                continue
            entries.append((_key(element.key), element.value))
            if _mentions_scaler(self.ctx, element.key) or _mentions_scaler(
                self.ctx, element.value
            ):
                return
        index = next(
            (
                i
                for i, e in enumerate(literal.elements)
                if isinstance(e, cst.DictElement)
                and self._is_optimizer_state(_key(e.key), e.value)
            ),
            None,
        )
        if index is None:
            return
        optimizer_key = _key(literal.elements[index].key)
        key = scaler_key(optimizer_key)
        scaler, why = self._pick(save)
        if scaler is None or has_spread:
            why = (
                why
                if scaler is None
                else "the checkpoint dict has `**` entries that may already hold the scaler state"
            )
            self._report_save(save, key, scaler, why)
            return
        quote = (
            literal.elements[index].key.quote
            if isinstance(literal.elements[index].key, cst.SimpleString)
            else '"'
        )
        optimizer_element = literal.elements[index]

        def add(node: cst.Dict) -> cst.Dict:
            element = cst.DictElement(
                key=cst.SimpleString(f"{quote}{key}{quote}"),
                value=cst.parse_expression(f"{scaler.expression}.state_dict()"),
                whitespace_before_colon=optimizer_element.whitespace_before_colon,
                whitespace_after_colon=optimizer_element.whitespace_after_colon,
            )
            return node.with_changes(
                elements=insert_item(
                    node.elements, index, element, node.lbrace.whitespace_after
                )
            )

        self.extended.add(literal)
        self.replace(
            literal,
            add,
            f"checkpoint also saves the GradScaler state (`{key}`)",
            needs_torch_npu=False,
            anchor=save,
        )

    def _save_dict_call(self, save: cst.Call, call: cst.Call) -> None:
        if call in self.extended:
            return
        if any(_mentions_scaler(self.ctx, a) for a in call.args):
            return
        index = next(
            (
                i
                for i, a in enumerate(call.args)
                if a.keyword is not None
                and self._is_optimizer_state(a.keyword.value, a.value)
            ),
            None,
        )
        if index is None:
            return
        key = scaler_key(call.args[index].keyword.value)
        scaler, why = self._pick(save)
        if scaler is None or any(a.star or a.keyword is None for a in call.args):
            why = (
                why
                if scaler is None
                else "`dict(...)` gets positional or `**` arguments that may already hold the scaler state"
            )
            self._report_save(save, key, scaler, why)
            return
        optimizer_arg = call.args[index]

        def add(node: cst.Call) -> cst.Call:
            arg = cst.Arg(
                keyword=cst.Name(key),
                value=cst.parse_expression(f"{scaler.expression}.state_dict()"),
                equal=optimizer_arg.equal,
            )
            return node.with_changes(
                args=insert_item(node.args, index, arg, node.whitespace_before_args)
            )

        self.extended.add(call)
        self.replace(
            call,
            add,
            f"checkpoint also saves the GradScaler state (`{key}`)",
            needs_torch_npu=False,
            anchor=save,
        )

    def _save_name(self, save: cst.Call, name: cst.Name) -> bool:
        """``torch.save(state, path)``: the dict ``state`` was bound to last, found by
        walking back from the save (a module-level script rebinds ``checkpoint`` to a
        ``torch.load`` result, to None and to the dict it saves)."""
        scope = self.ctx.scope(save)
        if scope is None:
            return False
        assignments = list(scope[name.value])
        if not assignments or any(a.scope is not scope for a in assignments):
            return False
        assign = reaching_assign(
            self.ctx, save, name.value, [a.node for a in assignments]
        )
        if assign is None:
            return False
        value = assign.value
        if not (isinstance(value, cst.Dict) or _is_dict_call(value)):
            return False
        defined_at = self.ctx.position(assign).start.line
        saved_at = self.ctx.position(save).start.line
        accesses = [
            access
            for access in scope.accesses[name.value]
            if defined_at <= self.ctx.position(access.node).start.line <= saved_at
        ]
        # keys stored later: `state["optimizer"] = optimizer.state_dict()`
        stores: list[tuple[str | None, cst.CSTNode, cst.CSTNode, cst.Subscript]] = []
        for access in accesses:
            node = access.node
            if node is name:
                continue
            subscript = self.ctx.parent(node)
            statement = self.ctx.enclosing_statement(node)
            if isinstance(subscript, cst.Subscript) and isinstance(
                self.ctx.parent(subscript), cst.AssignTarget
            ):
                assign_node = self.ctx.parent(self.ctx.parent(subscript))
                key = _subscript_key(subscript)
                stores.append((key, assign_node.value, statement, subscript))
                if _SCALER.search(key or "") or _mentions_scaler(
                    self.ctx, assign_node.value
                ):
                    return True
            elif statement is not None and _SCALER.search(
                self.ctx.module.code_for_node(statement)
            ):
                return True  # `state.update(scaler=...)` and the like
        if isinstance(value, cst.Dict):
            if any(
                isinstance(e, cst.DictElement)
                and self._is_optimizer_state(_key(e.key), e.value)
                for e in value.elements
            ):
                self._save_literal(save, value)
                return True
        elif any(
            a.keyword is not None and self._is_optimizer_state(a.keyword.value, a.value)
            for a in value.args
        ):
            self._save_dict_call(save, value)
            return True
        for key, stored, statement, subscript in stores:
            if self._is_optimizer_state(key, stored):
                self._save_store(save, name.value, key, statement, subscript)
                return True
        return True

    def _save_store(self, save, dict_name, optimizer_key, statement, subscript) -> None:
        key = scaler_key(optimizer_key)
        scaler, why = self._pick(save)
        if (
            scaler is None
            or not isinstance(statement, cst.SimpleStatementLine)
            or len(statement.body) != 1
        ):
            self._report_save(
                save,
                key,
                scaler,
                why or "the optimizer entry is not stored on a line of its own",
            )
            return
        if statement in self.extended:
            return
        self.extended.add(statement)
        index = subscript.slice[0].slice.value
        quote = index.quote if isinstance(index, cst.SimpleString) else '"'
        line = f"{dict_name}[{quote}{key}{quote}] = {scaler.expression}.state_dict()\n"
        self.insert_after(
            statement,
            [cst.parse_statement(line, config=self.ctx.module.config_for_parsing)],
            f"checkpoint also saves the GradScaler state (`{key}`)",
            anchor=save,
        )

    def _report_save(self, save, key: str, scaler: _Scaler | None, why: str) -> None:
        scaler = scaler or self._hint
        expression = scaler.expression if scaler is not None else "scaler"
        value = f"{expression}.state_dict()"
        if scaler is not None and scaler.optional:
            value += f" if {expression} is not None else None"
        self.report(
            save,
            f"checkpoint saves optimizer state but not the GradScaler state ({why})",
            f'add `"{key}": {value}` to the saved dict (pass the GradScaler here if needed), '
            f'and on resume `{expression}.load_state_dict(ckpt["{key}"])`',
        )

    # -- load --------------------------------------------------------------------------

    def _check_load(self, load: cst.Call) -> None:
        receiver = dotted(load.func.value)
        if (
            receiver is None
            or _SCALER.search(receiver)
            or len(load.args) != 1
            or load.args[0].keyword
            or load.args[0].star
        ):
            return
        argument = load.args[0].value
        followed = isinstance(argument, cst.Subscript) and is_pure_reference(argument)
        optimizer_key = _subscript_key(argument) if followed else None
        if not (
            receiver in self.optimizers
            or _looks_like_optimizer(optimizer_key, receiver)
        ):
            return
        function = _function_of(self.ctx, load)
        if function in self.restored or self._restores_scaler(load):
            return
        self.restored.add(
            function
        )  # one restore per function (GANs load two optimizers)
        if optimizer_key is None:
            # `snapshot.optimizer_state`, `torch.load(opt_path)`, `ckpt[key]`: no key to mirror
            hint = self._scalers_at(load)
            expression = hint[0].expression if len(hint) == 1 else "scaler"
            self.report(
                load,
                "optimizer state is restored but the GradScaler state is not",
                f"save `{expression}.state_dict()` with the optimizer state and restore it here "
                f"with `{expression}.load_state_dict(...)`",
            )
            return
        index = argument.slice[0].slice.value
        restore = _Restore(
            key=scaler_key(optimizer_key),
            quote=index.quote if isinstance(index, cst.SimpleString) else '"',
            checkpoint=argument.value,
            code=self.ctx.module.code_for_node(argument.value),
        )
        later = self._later_scaler(load)
        if later is not None:
            self._restore_after_creation(load, restore, *later)
            return
        scaler, why = self._pick(load)
        statement = self.ctx.enclosing_statement(load)
        own_line = (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and statement.body[0].value is load
        )
        hint = scaler or self._hint
        code = restore.statement(hint or _Scaler("scaler", False))
        if scaler is None or not own_line:
            why = why or "the call is not a statement of its own"
            suggestion = "add after this line: " + " ".join(code.split())
            if scaler is None and hint is None:
                created = [*self.name_targets, *self.attributes]
                where = (
                    f" (`{created[0].value}`, created at line "
                    f"{self.ctx.position(created[0]).start.line})"
                    if len(created) == 1 and isinstance(created[0], cst.Name)
                    else ""
                )
                suggestion = (
                    f"pass the GradScaler{where} to this function, then {suggestion}"
                )
            self.report(
                load,
                f"optimizer state is restored but the GradScaler state is not ({why})",
                suggestion,
            )
            return
        self.insert_after(
            statement,
            [cst.parse_statement(code, config=self.ctx.module.config_for_parsing)],
            f"restore the GradScaler state (`{restore.key}`) with the optimizer state",
            anchor=load,
        )

    # -- load before the scaler exists -------------------------------------------------

    def _later_scaler(
        self, site: cst.CSTNode
    ) -> tuple[_Scaler, cst.SimpleStatementLine] | None:
        """The GradScaler that the function (or module) of ``site`` creates only after
        ``site``, with the statement creating it; None unless there is exactly one."""
        line = self.ctx.position(site).start.line
        function = _function_of(self.ctx, site)
        found: list[tuple[_Scaler, cst.CSTNode]] = []
        scope = self.ctx.scope(site)
        for name in sorted(self.names):
            assignments = list(scope[name]) if scope is not None else []
            targets = [getattr(a, "node", None) for a in assignments]
            if (
                assignments
                and all(a.scope is scope for a in assignments)
                and all(t in self.name_targets for t in targets)
                and all(self.ctx.position(t).start.line > line for t in targets)
            ):
                if len(targets) != 1:
                    return None
                found.append((_Scaler(name, self.name_targets[targets[0]]), targets[0]))
        method = self._method_of(site)
        if method is not None:
            klass, receiver = method
            by_attr: dict[str, list[tuple[cst.Attribute, cst.CSTNode | None]]] = {}
            for target, value in self.attribute_assigns:
                if (
                    target.value.value == receiver
                    and _function_of(self.ctx, target) is function
                ):
                    by_attr.setdefault(target.attr.value, []).append((target, value))
            for attr, assigns in sorted(by_attr.items()):
                if (klass, attr) not in self.attributes:
                    continue
                if any(self.ctx.position(t).start.line <= line for t, _ in assigns):
                    continue  # assigned before the site: the usual path applies
                kinds = [self._creation_kind(v) for _, v in assigns]
                if len(assigns) != 1 or kinds[0] is None:
                    return None
                found.append(
                    (
                        _Scaler(f"{receiver}.{attr}", kinds[0] == "optional"),
                        assigns[0][0],
                    )
                )
        if len(found) != 1:
            return None
        scaler, target = found[0]
        statement = self.ctx.enclosing_statement(target)
        if (
            not isinstance(statement, cst.SimpleStatementLine)
            or len(statement.body) != 1
        ):
            return None
        return scaler, statement

    def _restore_after_creation(
        self,
        load: cst.Call,
        restore: _Restore,
        scaler: _Scaler,
        creation: cst.SimpleStatementLine,
    ) -> None:
        """The checkpoint is read before the GradScaler exists (`ckpt = torch.load(...)`,
        ..., `scaler = GradScaler()`): restore right after the scaler is created,
        when the checkpoint is still there. Reported with that place otherwise."""
        created_at = self.ctx.position(creation).start.line
        guard, prologue = self._checkpoint_guard(load, restore.checkpoint, creation)
        if guard is None:
            code = " ".join(restore.statement(scaler).split())
            body = block_body(self.ctx, creation)
            holder = child_in(self.ctx, load, body) if body is not None else None
            move = (
                f"move the GradScaler creation (line {created_at}) above line "
                f"{self.ctx.position(holder).start.line}"
                if holder is not None and holder is not creation
                else "create the GradScaler before the checkpoint is loaded"
            )
            self.report(
                load,
                "optimizer state is restored but the GradScaler state is not: "
                f"`{scaler.expression}` is created only later",
                f"{move}, and add after this line: {code} (restoring right after "
                f"line {created_at} instead needs `{restore.code}` to still hold the "
                "checkpoint there)",
            )
            return
        config = self.ctx.module.config_for_parsing
        message = (
            f"restore the GradScaler state (`{restore.key}`) once the GradScaler "
            f"exists (line {created_at})"
        )
        self.insert_after(
            creation,
            [cst.parse_statement(restore.statement(scaler, guard), config=config)],
            message,
            anchor=load,
        )
        if prologue is not None:
            # `ckpt = None` opens the statement that loads it, under that statement's
            # comment ("# resume from a checkpoint if there is one")
            statement, line = prologue
            insert_above(
                self,
                statement,
                cst.parse_statement(line, config=config),
                message,
                anchor=load,
            )

    def _checkpoint_guard(
        self, load: cst.Call, checkpoint: cst.CSTNode, creation: cst.CSTNode
    ) -> tuple[str | None, tuple[cst.CSTNode, str] | None]:
        """How to test, right after ``creation``, that the checkpoint variable read at
        ``load`` holds it: ``""`` (it surely does), ``"ckpt is not None"``, or None
        (no sound test); plus a ``ckpt = None`` line to insert before the statement
        that loads it, when the variable is bound only there."""
        root = checkpoint
        while isinstance(root, cst.Subscript):
            root = root.value
        body = block_body(self.ctx, creation)
        scope = self.ctx.scope(load)
        if not isinstance(root, cst.Name) or body is None or scope is None:
            return None, None
        holder = child_in(self.ctx, load, body)
        if holder is None or index_in(body, holder) >= index_in(body, creation):
            return None, None  # the load is not in a statement that runs before it
        assignments = list(scope[root.value])
        if any(a.scope is not scope for a in assignments):
            return None, None
        bindings = [a.node for a in assignments]
        deletions = [
            access.node
            for access in scope.accesses[root.value]
            if any(isinstance(a, cst.Del) for a in self.ctx.ancestors(access.node))
        ]
        first, last = (
            self.ctx.position(load).start.line,
            self.ctx.position(creation).start.line,
        )
        if any(
            first < self.ctx.position(n).start.line < last for n in bindings + deletions
        ):
            return None, None  # rebound or deleted before the scaler exists
        if holder is self.ctx.enclosing_statement(load):
            return "", None  # loaded in the same block: still there
        earlier = [
            b
            for b in bindings
            if self.ctx.position(b).start.line < last
            and not inside(self.ctx, b, holder)
        ]
        is_none = f"{root.value} is not None"
        if not earlier:
            return is_none, (holder, f"{root.value} = None\n")
        if all(_assigns_none(self.ctx, b, root.value) for b in earlier):
            return is_none, None
        return None, None

    def _restores_scaler(self, load: cst.Call) -> bool:
        """The function of ``load`` already calls ``<...scaler...>.load_state_dict``, or
        ``<x>.load_state_dict(ckpt[<a key naming the scaler>])`` (this rule's own line for a
        scaler held under another name: ``other.load_state_dict(ckpt["scaler_state_dict"])``,
        which a second run must recognise)."""
        function = _function_of(self.ctx, load)
        return any(
            (_SCALER.search(dotted(other.func.value) or "")
             or (other.args and _SCALER.search(self.ctx.module.code_for_node(other.args[0].value))))
            and _function_of(self.ctx, other) is function
            for other in self.loads
        )


def _targets(assign: cst.Assign | cst.AnnAssign) -> list[cst.BaseExpression]:
    if isinstance(assign, cst.Assign):
        return [t.target for t in assign.targets]
    return [assign.target]


def _is_dict_call(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "dict"
    )


def _key(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes
            return None
        return value if isinstance(value, str) else None
    return None


def _subscript_key(subscript: cst.Subscript) -> str | None:
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    return _key(subscript.slice[0].slice.value)


def _mentions_scaler(ctx, node: cst.CSTNode | None) -> bool:
    if node is None:
        return False
    return bool(_SCALER.search(ctx.module.code_for_node(node)))


@dataclass
class _Restore:
    """``if "scaler" in ckpt: scaler.load_state_dict(ckpt["scaler"])`` for one load."""

    key: str
    quote: str
    checkpoint: cst.CSTNode  # `ckpt` in `optimizer.load_state_dict(ckpt["optimizer"])`
    code: str

    def statement(self, scaler: _Scaler, guard: str = "") -> str:
        key = f"{self.quote}{self.key}{self.quote}"
        test = f"{key} in {self.code}"
        if guard:
            test = f"{guard} and {test}"
        if scaler.optional:
            test = f"{scaler.expression} is not None and {test}"
        return (
            f"if {test}:\n    {scaler.expression}.load_state_dict({self.code}[{key}])\n"
        )


def _function_of(ctx, node: cst.CSTNode) -> cst.FunctionDef | None:
    return next(
        (a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None
    )


def _assigns_none(ctx, binding: cst.CSTNode, name: str) -> bool:
    assign = single_assign(ctx.enclosing_statement(binding), name)
    return (
        assign is not None
        and isinstance(assign.value, cst.Name)
        and assign.value.value == "None"
    )
