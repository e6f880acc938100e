"""NPU301: ``torch.cuda.amp`` -> the device-generic ``torch.amp`` API with ``"npu"``."""

from __future__ import annotations

import functools
from collections.abc import Callable

import libcst as cst

from npu_migrate.python.cst_util import from_import_names
from npu_migrate.python.imports import (
    NO_NPU_AMP,
    NPU_IS_CUDA,
    guard_text,
    npu_device_type,
)
from npu_migrate.pipeline.requirements import admits_below
from npu_migrate.python.rule import Example, Rule
from npu_migrate.python.version_fallback import FALLBACK_MESSAGE, in_version_fallback

from ._common import (
    MODULES,
    TARGETS,
    autocast_args_ok,
    autocast_call,
    bare_custom_decorator,
    cuda_root_to_torch,
    custom_call,
    drop_cuda,
    in_amp,
    scaler_call,
)

_TYPE_CHECKS = frozenset({"isinstance", "issubclass"})


def _suggestion(qualified: str) -> str:
    kind, target = TARGETS.get(qualified, (None, None))
    if kind == "autocast":
        return f'use `{target}("npu", ...)` (or `functools.partial({target}, "npu")` where a callable is passed around)'
    if kind == "scaler":
        return f'use `{target}("npu", ...)`'
    if kind == "custom":
        return f'use `@{target}(device_type="npu", ...)`'
    return 'use the device-generic torch.amp API with device "npu" (torch.amp.autocast("npu"), torch.amp.GradScaler("npu"))'


class TorchCudaAmp(Rule):
    id = "NPU301"
    targets = ("npu", "cpu")
    name = "torch-cuda-amp"
    summary = 'Rewrite `torch.cuda.amp.autocast/GradScaler/custom_fwd/custom_bwd` to `torch.amp` with device "npu"'
    triggers = ("amp",)
    local_names = ("torch.cuda.amp",)  # in any import form; `amp` alone is also torch.amp
    rationale = """
`torch.cuda.amp.*` is deprecated in torch 2.13 (it warns and points to
`torch.amp.autocast("cuda", ...)`) and runs on CUDA only. The target is the
device-generic `torch.amp` API with the device `"npu"`:

- `torch.cuda.amp.autocast(...)` -> `torch.amp.autocast("npu", ...)`. torch_npu's
  own `torch.npu.amp.autocast` is a thin subclass that calls
  `torch.amp.autocast_mode.autocast.__init__("npu", ...)` and says in its docstring
  that it equals `torch.autocast("npu", ...)` (`torch_npu/npu/amp/autocast_mode.py`).
  Positional arguments become keywords (`enabled=`, `dtype=`, `cache_enabled=`),
  because `torch.amp.autocast`'s second parameter is `dtype`.
- `torch.cuda.amp.GradScaler(...)` -> `torch.amp.GradScaler("npu", ...)`; the
  other parameters keep their order. Its unscale and update kernels
  (`_amp_foreach_non_finite_check_and_unscale_`, `_amp_update_scale_`) are NPU ops in
  torch_npu 2.13, and its `state_dict` keeps the CUDA format, so existing
  checkpoints load. (`torch.npu.amp.GradScaler` also exists: a subclass with a
  `dynamic` flag and an all-reduced overflow count, which prints on every
  scale change; use it by hand if you need those.)
- `custom_fwd` / `custom_bwd` -> `torch.amp.custom_fwd(device_type="npu", ...)`:
  torch_npu deprecates its own `torch.npu.amp.custom_fwd/bwd` with a FutureWarning
  that names exactly this form. The bare decorator `@custom_fwd` becomes
  `@custom_fwd(device_type="npu")`; `cast_inputs=` is kept.

**Projects on an older torch.** `torch.amp.GradScaler(device, ...)` is torch 2.3's and
`torch.amp.custom_fwd(device_type=...)` torch 2.4's; torch-npu X.Y pairs with torch X.Y
exactly. Where the project's dependency files allow an older torch (`torch~=2.1.0`, a
conda environment's `pytorch=2.2.2`, `<2.3`, and also `torch>=2.0.1`: Ascend images often
carry a torch 2.1 with its CANN; held-out round 22), a `torch.cuda.amp.GradScaler(...)` call
becomes torch_npu's own `torch.npu.amp.GradScaler(...)`, same parameters (VAR, MAR), and
the other forms (`from torch.cuda.amp import GradScaler`, custom_fwd/bwd) are reported with
the torch_npu name to use. autocast has its device-generic form in every torch 2.x. With no
pin, or one that admits only 2.3 or later, today's `torch.amp` form is written.

Every import form works. `torch.cuda.amp.X` chains lose their `cuda` segment
(`torch.amp.X`); import statements are rewritten in place instead of adding new
ones: `from torch.cuda.amp import autocast, GradScaler` -> `from torch.amp import
autocast, GradScaler`, `from torch.cuda import amp` -> `from torch import amp`,
`import torch.cuda.amp as amp` -> `import torch.amp as amp`; the calls through
them get `"npu"`. A name is only rewritten when every use of it in the file is a
call, a decorator, a type annotation or an `isinstance` check: `ctx = autocast`
and then `ctx(enabled=...)` would lose the device, so then the import and its
uses are left alone and reported. A name imported more than once (scripts pasted
together repeat their imports) moves with all its imports or with none, so it
never ends up naming two modules. Other `torch.cuda.amp` names (`common`,
`amp_definitely_not_available`...) are reported. The device string inside an
already device-generic call (`torch.autocast("cuda")`) is NPU1xx's job.
"""
    examples = (
        Example(
            "import torch\nscaler = torch.cuda.amp.GradScaler(init_scale=2.0**14)\nwith torch.cuda.amp.autocast(dtype=torch.bfloat16):\n    pass\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(NPU_IS_CUDA, npu_device_type(), NO_NPU_AMP)) +
                "\n"
                'scaler = torch.amp.GradScaler("npu", init_scale=2.0**14)\n'
                'with torch.amp.autocast("npu", dtype=torch.bfloat16):\n'
                "    pass\n"
            ),
        ),
        Example(
            "from torch.cuda.amp import autocast, custom_fwd\n\n@custom_fwd\ndef forward(ctx, x):\n    with autocast(False):\n        return x\n",
            (
                "from torch.amp import autocast, custom_fwd\n"
                "\n"
                + guard_text(fallback=("import torch", NPU_IS_CUDA, npu_device_type(), NO_NPU_AMP)) +
                "\n"
                '@custom_fwd(device_type="npu")\n'
                "def forward(ctx, x):\n"
                '    with autocast("npu", enabled=False):\n'
                "        return x\n"
            ),
        ),
        Example("import torch\nwith torch.autocast(device_type=x.device.type):\n    pass\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: local name bound by an import to something under torch.cuda.amp -> its uses
        self.alias_uses: dict[str, list[tuple[cst.CSTNode, str]]] = {}
        #: local name -> every (import statement, alias, imported qualified name) binding it
        self.alias_imports: dict[str, list[tuple[cst.Import | cst.ImportFrom, cst.ImportAlias, str]]] = {}

    # -- uses -----------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def _use(self, node: cst.Attribute | cst.Name) -> None:
        qualified = self.ctx.use_name(node)
        if not in_amp(qualified):
            return
        if qualified in TARGETS and in_version_fallback(self.ctx, node, {qualified.rsplit(".", 1)[1]}):
            self.report(node, f"`{qualified}` {FALLBACK_MESSAGE}",
                        f"on a torch without `{TARGETS[qualified][1]}`, use torch_npu's "
                        f"`{qualified.replace('.cuda.', '.npu.')}` (same parameters)")
            return
        root = _root(node)
        binding = self.ctx.imports.bindings.get(root.value) if root is not None else None
        if root is not None and root.value in self.ctx.imports.conflicting:
            binding = None  # imported twice with different targets: do not guess which one this is
        if (floor := self._too_new(qualified)) is not None and binding is not None and not in_amp(binding):
            self._older_torch(node, qualified, binding, floor)
            return
        if binding == "torch" and isinstance(node, cst.Attribute):
            self._rewrite_use(node, qualified, drop_cuda)
        elif binding == "torch.cuda" and isinstance(node, cst.Attribute) and self._torch_is_free():
            if self._rewrite_use(node, qualified, cuda_root_to_torch):
                self.add_import("torch")
        elif binding is not None and in_amp(binding):
            self.alias_uses.setdefault(root.value, []).append((node, qualified))
        else:
            self.report(node, f"`{qualified}` runs on CUDA only", _suggestion(qualified))

    def _too_new(self, qualified: str) -> str | None:
        """The torch release that brought ``qualified``'s torch.amp target, where the project
        allows an older torch (its dependency files admit one: ``torch>=2.0.1`` is D-FINE's,
        held-out round 22; ``from torch.amp import GradScaler`` failed on the torch 2.2 it
        allows): None otherwise."""
        floor = _FLOOR.get(TARGETS.get(qualified, (None,))[0])
        if floor is None or not admits_below(self.ctx.facts.torch_specifier, floor):
            return None
        return floor

    def _older_torch(self, node: cst.CSTNode, qualified: str, binding: str, floor: str) -> None:
        """A project on an older torch: ``torch.cuda.amp.GradScaler(...)`` becomes torch_npu's
        own ``torch.npu.amp.GradScaler(...)`` (same parameters; torch.amp.GradScaler is torch
        2.3's); what cannot be written that way is reported."""
        kind, target = TARGETS[qualified]
        usage = self._usage(node, qualified)
        pinned = self.ctx.facts.torch_specifier
        if kind == "scaler" and binding == "torch" and usage is not None and usage[0] == "call":
            self.replace(node, _cuda_to_npu, f"`{qualified}` -> `{qualified.replace('.cuda.', '.npu.')}` "
                         f"(this project's torch, {pinned}, predates `{target}`)")
            return
        self.report(node, f"`{qualified}` runs on CUDA only, and `{target}` needs torch {floor} while this "
                    f"project pins torch {pinned}; left unchanged",
                    f"use `{qualified.replace('.cuda.', '.npu.')}` (torch_npu's own, same parameters), or raise the "
                    f"torch pin to {floor} or later and run npu-migrate again")

    def _torch_is_free(self) -> bool:
        return self.ctx.imports.bindings.get("torch", "torch") == "torch"

    def _usage(self, node: cst.CSTNode, qualified: str) -> tuple[str, cst.CSTNode | None] | None:
        """How ``node`` is used: ("call", Call), ("decorator", Decorator), ("type", None);
        None when it cannot be rewritten safely."""
        kind = TARGETS.get(qualified, (None,))[0]
        if kind is None:
            return None
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            if kind == "autocast" and not autocast_args_ok(parent):
                return None
            return ("call", parent)
        if isinstance(parent, cst.Decorator):
            return ("decorator", parent) if kind == "custom" else None
        if kind in ("autocast", "scaler") and self._is_type_use(node):
            return ("type", None)
        return None

    def _is_type_use(self, node: cst.CSTNode) -> bool:
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.Annotation):
                return True
            if isinstance(ancestor, cst.Arg):
                call = self.ctx.parent(ancestor)
                return (
                    isinstance(call, cst.Call)
                    and isinstance(call.func, cst.Name)
                    and call.func.value in _TYPE_CHECKS
                    and len(call.args) == 2
                    and call.args[1] is ancestor
                )
            if not isinstance(ancestor, (cst.Tuple, cst.Element)):
                return False
        return False

    def _rewrite_use(self, node: cst.CSTNode, qualified: str, rename: Callable | None) -> bool:
        usage = self._usage(node, qualified)
        if usage is None:
            self.report(node, f"`{qualified}` is used in a way npu-migrate cannot rewrite safely", _suggestion(qualified))
            return False
        kind, target = TARGETS[qualified]
        how, holder = usage
        message = f"`{qualified}` -> `{target}`" + (' with "npu"' if how != "type" else "")
        if rename is not None:
            self.replace(node, rename, message)
        if how == "call":
            transform = {"autocast": autocast_call, "scaler": scaler_call, "custom": custom_call}[kind]
            self.replace(holder, functools.partial(transform, quote=self.ctx.quote, device=self.ctx.target.device), message, anchor=node)
        elif how == "decorator":
            self.replace(holder, functools.partial(bare_custom_decorator, quote=self.ctx.quote,
                                                   device=self.ctx.target.device), message, anchor=node)
        return True

    # -- imports ----------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = cst.helpers.get_full_name_for_node(alias.name)
            if not in_amp(full):
                continue
            if alias.asname is None:
                # `import torch.cuda.amp`: uses go through `torch`; torch imports
                # torch.amp itself, so the statement can name it instead.
                if full in MODULES:
                    new = MODULES[full]
                    self.replace(alias, lambda a, new=new: a.with_changes(name=cst.parse_expression(new)), f"`import {full}` -> `import {new}`")
                continue
            self._record_import(alias.asname.name.value, node, alias, full)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = cst.helpers.get_full_name_for_node(node.module)
        if isinstance(node.names, cst.ImportStar):
            if in_amp(module):
                self.report(node, f"`from {module} import *` brings in CUDA-only AMP names", _suggestion(module))
            return
        for alias, full, local in from_import_names(node):
            if in_amp(full):
                self._record_import(local, node, alias, full)

    def _record_import(self, local: str, statement, alias: cst.ImportAlias, full: str) -> None:
        if local in self.ctx.imports.conflicting:
            # the same name is imported elsewhere with another target: uses cannot be attributed
            self.report(alias, f"`{full}` runs on CUDA only; `{local}` is also imported from elsewhere, left unchanged", _suggestion(full))
            return
        self.alias_imports.setdefault(local, []).append((statement, alias, full))

    def leave_file(self) -> None:
        by_statement: dict[cst.CSTNode, list[tuple[str, cst.ImportAlias, str]]] = {}
        for local, imports in self.alias_imports.items():
            for statement, alias, full in imports:
                by_statement.setdefault(statement, []).append((local, alias, full))
        movable = self._movable(by_statement)
        for statement, entries in by_statement.items():
            if isinstance(statement, cst.Import):
                for local, alias, imported in entries:
                    if local in movable:
                        self._move_alias(alias, imported)
                    else:
                        self._report_import(local, alias, imported)
            elif all(local in movable for local, _, _ in entries):
                self._move_from_import(statement)
            else:
                for local, alias, imported in entries:
                    self._report_import(local, alias, imported)
        for local in self.alias_imports:
            if local in movable:
                self._rewrite_uses(local)
            else:
                self._report_uses(local)

    def _movable(self, by_statement: dict[cst.CSTNode, list[tuple[str, cst.ImportAlias, str]]]) -> set[str]:
        """The local names whose imports and uses can all be rewritten.

        A name is imported by one statement or by several (the same import repeated,
        as concatenated scripts and merged modules do). It moves with every one of
        them or with none: moving only some would bind it to two modules, and the next
        run could no longer tell which one a use means (``conflicting``), so it would
        report what this run rewrote. A ``from`` import moves as a whole, so a name it
        cannot move keeps the other names it imports (and their other imports) too."""
        movable = {local for local, imports in self.alias_imports.items() if self._safe(local, imports[0][2])}
        for statement, entries in by_statement.items():
            if isinstance(statement, cst.Import):
                # `import torch.cuda.amp.X as y` names a module; only modules have one to move to
                movable -= {local for local, _, imported in entries if imported not in MODULES}
            elif len(entries) != len(statement.names) or _new_module(statement) is None:
                movable -= {local for local, _, _ in entries}
        from_imports = [
            {local for local, _, _ in entries}
            for statement, entries in by_statement.items()
            if isinstance(statement, cst.ImportFrom)
        ]
        while stuck := {name for names in from_imports if not names <= movable for name in names & movable}:
            movable -= stuck
        return movable

    def _safe(self, local: str, imported: str) -> bool:
        """Every use through ``local`` can be rewritten (and the name itself has a target)."""
        if imported not in MODULES and imported not in TARGETS:
            return False
        if self._too_new(imported) or any(self._too_new(q) for _, q in self.alias_uses.get(local, [])):
            return False  # its torch.amp target is newer than the project's torch: reported
        return all(self._usage(node, q) is not None for node, q in self.alias_uses.get(local, []))

    def _rewrite_uses(self, local: str) -> None:
        for node, qualified in self.alias_uses.get(local, []):
            self._rewrite_use(node, qualified, None)


    def _report_import(self, local: str, alias: cst.ImportAlias, imported: str) -> None:
        self.report(alias, f"`{imported}` runs on CUDA only; {self._why(local, imported)}",
                    self._older_suggestion(imported) or _suggestion(imported))

    def _report_uses(self, local: str) -> None:
        for node, qualified in self.alias_uses.get(local, []):
            self.report(node, f"`{qualified}` runs on CUDA only; {self._why(local, qualified)}",
                        self._older_suggestion(qualified) or _suggestion(qualified))

    def _why(self, local: str, qualified: str) -> str:
        if (floor := self._too_new(qualified)) is not None:
            return (f"left unchanged: its torch.amp form needs torch {floor}, and this project pins torch "
                    f"{self.ctx.facts.torch_specifier}")
        return f"left unchanged: not every use or import of `{local}` in this file can be rewritten"

    def _older_suggestion(self, qualified: str) -> str | None:
        if self._too_new(qualified) is None:
            return None
        return f"import it from torch.npu.amp instead (torch_npu's own `{qualified.replace('.cuda.', '.npu.')}`)"

    def _move_alias(self, alias: cst.ImportAlias, imported: str) -> None:
        new = MODULES[imported]
        self.replace(alias, lambda a: a.with_changes(name=cst.parse_expression(new)), f"`import {imported}` -> `import {new}`")

    def _move_from_import(self, statement: cst.ImportFrom) -> None:
        module = cst.helpers.get_full_name_for_node(statement.module)
        new_module = _new_module(statement)
        self.replace(
            statement,
            lambda s: s.with_changes(module=cst.parse_expression(new_module)),
            f"`from {module} import ...` -> `from {new_module} import ...`",
        )


def _new_module(statement: cst.ImportFrom) -> str | None:
    """Where ``from <module> import ...`` moves to: ``torch`` for ``from torch.cuda
    import amp``, the torch.amp counterpart of a torch.cuda.amp module, else None."""
    module = cst.helpers.get_full_name_for_node(statement.module)
    return "torch" if module == "torch.cuda" else MODULES.get(module)


#: kind -> the torch release whose torch.amp has it with a device argument
_FLOOR = {"scaler": "2.3", "custom": "2.4"}


def _cuda_to_npu(node: cst.Attribute) -> cst.Attribute:
    """``torch.cuda.amp.X`` -> ``torch.npu.amp.X`` (the ``cuda`` part of the chain renamed)."""
    if isinstance(node.value, cst.Attribute):
        if node.value.attr.value == "cuda" and isinstance(node.value.value, cst.Name):
            return node.with_changes(value=node.value.with_changes(attr=cst.Name("npu")))
        return node.with_changes(value=_cuda_to_npu(node.value))
    return node


def _root(node: cst.CSTNode) -> cst.Name | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None
