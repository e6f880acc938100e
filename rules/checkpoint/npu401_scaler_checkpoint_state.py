"""NPU401: checkpoints of AMP training must carry the GradScaler state."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.rule import Example, Rule

from ._common import dotted, insert_item, is_pure_reference

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
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


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


def _is_optimizer_state(key: str | None, value: cst.CSTNode) -> bool:
    if not _is_state_dict_call(value):
        return False
    receiver = dotted(value.func.value) or ""
    return bool(_OPTIMIZER.search(key or "") or _OPTIMIZER.search(receiver))


class ScalerCheckpointState(Rule):
    id = "NPU401"
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

- **Save**: a `torch.save` of a dict that holds `<optimizer>.state_dict()` (a
  key or a receiver containing `optim`) and nothing about a scaler gets
  `"scaler": <scaler>.state_dict()` right after the optimizer entry. Dict
  forms: a literal passed directly, a name bound to a literal in the same scope
  (`state = {...}; torch.save(state, path)`), `dict(optimizer=...)`, and a dict
  filled by `state["optimizer"] = opt.state_dict()` (then
  `state["scaler"] = scaler.state_dict()` is added after that line).
- **Load**: `<optimizer>.load_state_dict(ckpt[KEY])` on a line of its own gets
  `if "scaler" in ckpt:` / `scaler.load_state_dict(ckpt["scaler"])` right
  after it. The guard keeps old checkpoints (without the key) loadable.
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
helper), several scalers are in scope, the scaler may be None
(`GradScaler() if amp else None`), the dict has `**` entries, or the load is
not a statement of its own. Already handled, so left alone: a dict with any
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

    # -- collection ------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            self.loads.append(node)
            return
        qualified = self.qualified_name(func)
        if qualified in SCALER_CLASSES:
            self.creations.append(node)
        elif qualified in ("torch.save", "torch.serialization.save"):
            self.saves.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
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
                targets = (
                    [t.target for t in parent.targets]
                    if isinstance(parent, cst.Assign)
                    else [parent.target]
                )
                for target in targets:
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
        elif isinstance(value, cst.Name):
            self._save_name(save, value)

    def _save_literal(self, save: cst.Call, literal: cst.Dict) -> None:
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
                and _is_optimizer_state(_key(e.key), e.value)
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

        self.replace(
            literal,
            add,
            f"checkpoint also saves the GradScaler state (`{key}`)",
            needs_torch_npu=False,
            anchor=save,
        )

    def _save_dict_call(self, save: cst.Call, call: cst.Call) -> None:
        if any(_mentions_scaler(self.ctx, a) for a in call.args):
            return
        index = next(
            (
                i
                for i, a in enumerate(call.args)
                if a.keyword is not None
                and _is_optimizer_state(a.keyword.value, a.value)
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

        self.replace(
            call,
            add,
            f"checkpoint also saves the GradScaler state (`{key}`)",
            needs_torch_npu=False,
            anchor=save,
        )

    def _save_name(self, save: cst.Call, name: cst.Name) -> None:
        scope = self.ctx.scope(save)
        if scope is None:
            return
        assignments = [a for a in scope[name.value]]
        if len(assignments) != 1 or assignments[0].scope is not scope:
            return
        target = getattr(assignments[0], "node", None)
        assign = (
            self.ctx.parent(self.ctx.parent(target)) if target is not None else None
        )
        if (
            not isinstance(target, cst.Name)
            or not isinstance(assign, cst.Assign)
            or len(assign.targets) != 1
        ):
            return
        value = assign.value
        if not (isinstance(value, cst.Dict) or _is_dict_call(value)):
            return
        # keys stored later: `state["optimizer"] = optimizer.state_dict()`
        stores: list[tuple[str | None, cst.CSTNode, cst.CSTNode, cst.Subscript]] = []
        for access in assignments[0].references:
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
                    return
            elif statement is not None and _SCALER.search(
                self.ctx.module.code_for_node(statement)
            ):
                return  # `state.update(scaler=...)` and the like
        if isinstance(value, cst.Dict):
            if any(
                isinstance(e, cst.DictElement)
                and _is_optimizer_state(_key(e.key), e.value)
                for e in value.elements
            ):
                self._save_literal(save, value)
                return
        elif any(
            a.keyword is not None and _is_optimizer_state(a.keyword.value, a.value)
            for a in value.args
        ):
            self._save_dict_call(save, value)
            return
        for key, stored, statement, subscript in stores:
            if _is_optimizer_state(key, stored):
                self._save_store(save, name.value, key, statement, subscript)
                return

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
        if not isinstance(argument, cst.Subscript) or not is_pure_reference(argument):
            return
        optimizer_key = _subscript_key(argument)
        if optimizer_key is None or not (
            _OPTIMIZER.search(optimizer_key) or _OPTIMIZER.search(receiver)
        ):
            return
        if self._restores_scaler(load):
            return
        key = scaler_key(optimizer_key)
        index = argument.slice[0].slice.value
        quote = index.quote if isinstance(index, cst.SimpleString) else '"'
        checkpoint = self.ctx.module.code_for_node(argument.value)
        scaler, why = self._pick(load)
        statement = self.ctx.enclosing_statement(load)
        own_line = (
            isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and statement.body[0].value is load
        )
        hint = scaler or self._hint
        expression = hint.expression if hint is not None else "scaler"
        guard = f"{quote}{key}{quote} in {checkpoint}"
        if hint is not None and hint.optional:
            guard = f"{expression} is not None and {guard}"
        code = (
            f"if {guard}:\n"
            f"    {expression}.load_state_dict({checkpoint}[{quote}{key}{quote}])\n"
        )
        if scaler is None or not own_line:
            self.report(
                load,
                f"optimizer state is restored but the GradScaler state is not ({why or 'the call is not a statement of its own'})",
                "add after this line: " + " ".join(code.split()),
            )
            return
        self.insert_after(
            statement,
            [cst.parse_statement(code, config=self.ctx.module.config_for_parsing)],
            f"restore the GradScaler state (`{key}`) with the optimizer state",
            anchor=load,
        )

    def _restores_scaler(self, load: cst.Call) -> bool:
        function = next(
            (a for a in self.ctx.ancestors(load) if isinstance(a, cst.FunctionDef)),
            None,
        )
        for other in self.loads:
            receiver = dotted(other.func.value) or ""
            if not _SCALER.search(receiver):
                continue
            if (
                next(
                    (
                        a
                        for a in self.ctx.ancestors(other)
                        if isinstance(a, cst.FunctionDef)
                    ),
                    None,
                )
                is function
            ):
                return True
        return False


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
