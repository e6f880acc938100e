"""NPU101: ``torch.cuda.X`` -> ``torch.npu.X`` for every X that torch_npu provides."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.python import reaches_torch
from npu_migrate.python.cst_util import (
    call_arg,
    from_import_names,
    last_name,
    rename_attribute,
    string_value,
    with_string_value,
)
from npu_migrate.python.imports import NPU_IS_CUDA, guard_text
from npu_migrate.python.rule import Example, Rule

from ._cuda_names import CUDA, cuda_uses, is_cuda_name, root_binding

_NPU_WORD = re.compile(r"\bnpu\b")
#: ``mock.patch``, ``mock.patch.object``'s sibling forms, pytest-mock's ``mocker.patch``,
#: ``monkeypatch.setattr``/``delattr`` with a dotted string target
_PATCHERS = frozenset({"patch", "setattr", "delattr"})
#: ``torch.cuda.X[.Y]`` at the end of a dotted patch target (``pkg.train.torch.cuda.X``)
_PATCH_TARGET = re.compile(r"(?:(?<=\.)|^)torch\.cuda\.([A-Za-z_][\w.]*)$")


class TorchCudaApi(Rule):
    id = "NPU101"
    name = "torch-cuda-api"
    summary = "Rewrite `torch.cuda.X` to `torch.npu.X` where torch_npu provides X"
    triggers = ("cuda",)
    rationale = """
`torch_npu` registers `torch.npu` with the same API as `torch.cuda` for most
names (`is_available`, `synchronize`, `device_count`, `set_device`, memory
statistics, RNG, streams and events, legacy tensor types...). The list of names
comes from `npu_migrate/data/torch_npu_api.json`, generated from the published
torch-npu wheel by `scripts/gen_torch_npu_api.py`, so the tool never emits a
name that does not exist. Names torch_npu lacks or implements differently
(nvtx, `get_device_capability`, `torch.cuda.nccl`, CUDA graphs...) are reported
by NPU102 instead; `torch.cuda.amp` belongs to the AMP rules (NPU3xx). The module
itself (`hasattr(torch.cuda, "X")`, `mock.patch.object(torch.cuda, "X")`) becomes
`torch.npu`.

A `torch.cuda` value handed to another library as *its own* CUDA switch
(`MergeOptions(cuda=torch.cuda.is_available())`: a `cuda=`/`gpu=`/`use_cuda=`
keyword of a callee imported from a package that is neither torch, a torch device
library nor this project) does not reach torch: `torch.npu.is_available()` there
would ask that library for CUDA on Ascend. It is left unchanged and reported (the
shared analysis, `npu_migrate/python/reaches_torch.py`). A `torch.cuda` use guarded
by a test of another system's platform (`IS_NVIDIA and torch.cuda.get_device_name(0)`,
`if IS_NVIDIA:` where `IS_NVIDIA = triton_backend == "cuda"`) is code for NVIDIA GPUs
in a file that already tells platforms apart: left as it is, silently.

Test code patches these calls by name: `mock.patch("torch.cuda.is_available")`,
`mocker.patch("pkg.train.torch.cuda.device_count")`,
`monkeypatch.setattr("torch.cuda.synchronize", ...)`. Once the patched call is
rewritten, a patch of the old name no longer takes effect and the test silently
tests something else, so such target strings are rewritten with it.

Names are resolved through the file's imports, so aliases work:
`import torch.cuda as tc` becomes `import torch.npu as tc`,
`from torch.cuda import synchronize` becomes `from torch.npu import synchronize`,
and `from torch import cuda` becomes `from torch import npu` (with `cuda.X` uses
renamed). An aliased import is rewritten only when every use through it has an
NPU counterpart; otherwise it is left alone and the uses are reported.

When every use of such an alias belongs to another rule (`cuda.amp.autocast()`
becomes `torch.amp.autocast("npu")`), a renamed import would be left unused
(ruff F401), so the name is removed from the import, or the whole line when it
is the only name. A line or name that carries a comment is renamed instead, so
no comment is lost. If one of those uses stays (suppressed, or in code that
already handles NPU), the import stays exactly as it was, so it still binds.
"""
    examples = (
        Example(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(NPU_IS_CUDA,)) +
                "\n"
                "if torch.npu.is_available():\n"
                "    torch.npu.synchronize()\n"
            ),
        ),
        Example(
            "from torch.cuda import max_memory_allocated\nprint(max_memory_allocated())\n",
            (
                guard_text('from torch.npu import max_memory_allocated',
                           fallback=('from torch.cuda import max_memory_allocated',)) +
                "\n"
                "print(max_memory_allocated())\n"
            ),
        ),
        Example("import torch\nprint('running on cuda')\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.api = load_api()
        self.alias_uses: dict[str, list[tuple[cst.CSTNode, str]]] = {}
        # local name -> every import statement binding it to a torch.cuda name
        self.alias_imports: dict[str, list[tuple[cst.CSTNode, cst.ImportAlias]]] = {}
        self.removed: set[cst.ImportAlias] = set()
        self._replaced: set[cst.CSTNode] | None = None

    # -- uses ----------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def _use(self, node: cst.Attribute | cst.Name) -> None:
        qualified = cuda_uses(self.ctx, node)
        if qualified is None:
            self._owned_elsewhere_use(node)
            return
        binding = root_binding(self.ctx, node)
        if binding is not None and is_cuda_name(binding):
            # `tc.synchronize` / `synchronize`: decided per import in leave_file
            root = (node.value if isinstance(node, cst.Name) else _root(node).value)
            self.alias_uses.setdefault(root, []).append((node, qualified))
            return
        target = self.api.npu_name_for_cuda(qualified)
        if target is None or not isinstance(node, cst.Attribute):
            return  # NPU102 reports it
        if qualified == CUDA and not self._module_use_has_counterpart(node):
            return  # getattr(torch.cuda, "nvtx"): torch.npu has no nvtx; NPU102 reports it
        flow, why = reaches_torch.analysis(self.ctx).cuda_value(node)
        if flow is reaches_torch.Flow.AWARE:
            return  # `IS_NVIDIA and torch.cuda.X`: a path for another platform, told apart already
        if flow is not reaches_torch.Flow.TORCH:
            self.report(node, f"`{qualified}` is {why}; left unchanged",
                        f"on Ascend that library cannot use CUDA: pass what it should do there (usually False), "
                        f"or `{target}` only if the library itself supports Ascend")
            return
        self.replace(node, lambda n: rename_attribute(n, "cuda", "npu"), f"`{qualified}` -> `{target}`",
                     reason=f"`{qualified}` resolves through the file's imports to torch.cuda; torch_npu provides "
                            f"`{target}` (the torch-npu API table)")

    def _module_use_has_counterpart(self, node: cst.Attribute) -> bool:
        """``getattr(torch.cuda, "X")`` / ``hasattr(torch.cuda, "X")``: the module may be
        renamed only if ``torch.npu.X`` exists too."""
        arg = self.ctx.parent(node)
        call = self.ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
                and call.func.value in ("getattr", "hasattr", "setattr", "delattr")
                and len(call.args) >= 2 and call.args[0] is arg):
            return True
        name = string_value(call.args[1].value)
        return name is None or self.api.npu_name_for_cuda(f"{CUDA}.{name}") is not None

    def _owned_elsewhere_use(self, node: cst.Attribute | cst.Name) -> None:
        """A use such as ``cuda.amp.autocast`` through a ``torch.cuda`` alias: the AMP
        rules own it, so the alias import must stay (recorded as a use with no
        counterpart)."""
        if not self.ctx.is_outermost(node):
            return
        binding = root_binding(self.ctx, node)
        if binding is None or not is_cuda_name(binding):
            return
        qualified = self.ctx.qualified_name(node)
        if qualified is not None and qualified != binding and not is_cuda_name(qualified) and not self.ctx.in_import(node):
            root = node.value if isinstance(node, cst.Name) else _root(node).value
            self.alias_uses.setdefault(root, []).append((node, qualified))

    # -- mock.patch("torch.cuda.X") targets -------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        """``mock.patch("torch.cuda.is_available")``, ``mocker.patch("pkg.mod.torch.cuda.X")``,
        ``monkeypatch.setattr("torch.cuda.X", ...)``: once the patched call is rewritten to
        ``torch.npu.X``, a patch of the old name silently stops taking effect."""
        if last_name(node.func) not in _PATCHERS or not isinstance(node.func, (cst.Attribute, cst.Name)):
            return
        target = call_arg(node, "target", 0)
        value = string_value(target.value) if target is not None else None
        if value is None or not isinstance(target.value, cst.SimpleString):
            return
        match = _PATCH_TARGET.search(value)
        if match is None:
            return
        cuda_name = "torch.cuda." + match.group(1)
        if match.group(1).startswith("amp."):
            # NPU301 rewrites the AMP calls themselves by the project's torch
            # (`torch.amp.GradScaler("npu")`, or `torch.npu.amp.X` before torch 2.3) and
            # leaves a reference such as `autocast = torch.cuda.amp.autocast` alone: a patch
            # of `torch.npu.amp.X` would match neither (llama-cookbook's test_train_utils,
            # held-out round 15), so the target is reported, not guessed
            self.report(target.value, f"patch target `{value}`: the AMP call it patches is rewritten by NPU301 "
                        "(`torch.amp.X(\"npu\")` on torch 2.3 or later); left unchanged",
                        "patch what the migrated code calls: `torch.amp.GradScaler` / `torch.amp.autocast` "
                        "where NPU301 wrote those, else keep this target")
            return
        npu_name = self.api.npu_name_for_cuda(cuda_name)
        if npu_name is None:
            return  # not rewritten (NPU102 reports its uses), so the patch still applies
        new = value[: match.start()] + npu_name + value[match.end():]
        self.replace(target.value, lambda n: with_string_value(n, new),
                     f"patch target `{value}` -> `{new}` (the patched call is rewritten to `{npu_name}`)")

    # -- imports -------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = cst.helpers.get_full_name_for_node(alias.name)
            if not is_cuda_name(full):
                continue
            if alias.asname is None:
                if full == CUDA:  # `import torch.cuda`: uses go through `torch`, rewritten above
                    self.replace(alias, lambda a: a.with_changes(name=_dotted("torch.npu")), "`import torch.cuda` -> `import torch.npu`")
                continue
            self.alias_imports.setdefault(alias.asname.name.value, []).append((node, alias))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        for alias, full, local in from_import_names(node):
            if is_cuda_name(full):
                self.alias_imports.setdefault(local, []).append((node, alias))

    def _replaced_elsewhere(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node another rule replaces around this use (``cuda.amp.autocast()`` ->
        ``torch.amp.autocast("npu")``), which then no longer goes through the alias."""
        if self._replaced is None:
            self._replaced = {e.node for e in self.ctx.edits if e.rule != self.id and e.replacement is not None}
        return next((n for n in (node, *self.ctx.ancestors(node)) if n in self._replaced), None)

    def _requires(self, local: str) -> tuple[cst.CSTNode, ...]:
        """The other rules' edits an edit of the ``local`` import depends on."""
        found = (self._replaced_elsewhere(node) for node, _ in self.alias_uses.get(local, []))
        return tuple(n for n in found if n is not None)

    def leave_file(self) -> None:
        def uses_ok(local: str) -> bool:
            ok = all(
                (is_cuda_name(q) and self.api.npu_name_for_cuda(q)) or self._replaced_elsewhere(n) is not None
                for n, q in self.alias_uses.get(local, [])
            )
            if not ok:
                self._report_kept_alias(local)
            return ok

        from_statements: dict[cst.ImportFrom, list[tuple[str, cst.ImportAlias]]] = {}
        bindings = [(local, st, al) for local, found in self.alias_imports.items() for st, al in found]
        for local, statement, alias in bindings:
            if self._unused_after_migration(local) and self._remove_import(statement, alias, local):
                continue
            if isinstance(statement, cst.Import):
                if uses_ok(local):
                    self.replace(alias, lambda a: a.with_changes(name=_dotted("torch.npu")), "`import torch.cuda as ...` -> `import torch.npu as ...`",
                                 requires=self._requires(local))
                continue
            from_statements.setdefault(statement, []).append((local, alias))
        for statement, aliases in from_statements.items():
            module = cst.helpers.get_full_name_for_node(statement.module)
            aliases = [(local, alias) for local, alias in aliases if alias not in self.removed]
            if not aliases:
                continue
            if module == "torch":
                for local, alias in aliases:  # `from torch import cuda`
                    if uses_ok(local):
                        self._from_torch_import_cuda(alias, local, self.alias_uses.get(local, []))
                continue
            new_module = "torch.npu" + module[len(CUDA):]
            movable = [
                alias
                for local, alias in aliases
                if self.api.npu_name_for_cuda(f"{module}.{cst.helpers.get_full_name_for_node(alias.name)}")
                and uses_ok(local)
            ]
            if not movable:
                continue
            if len(movable) == len(aliases) == len(statement.names):
                self.replace(statement, _set_module(new_module), f"`from {module} import ...` -> `from {new_module} import ...`")
                continue
            # A mixed import: the names torch_npu has move to their own `from torch.npu... import`;
            # the rest stay (NPU102 reports them).
            self._split(statement, movable, module, new_module)

    def _unused_after_migration(self, local: str) -> bool:
        """Every use of the alias is rewritten by another rule (``cuda.amp.autocast()`` ->
        ``torch.amp.autocast("npu")``), so a renamed import would be left unused (F401)."""
        uses = self.alias_uses.get(local, [])
        return bool(uses) and all(self._replaced_elsewhere(node) is not None for node, _ in uses)

    def _remove_import(self, statement: cst.Import | cst.ImportFrom, alias: cst.ImportAlias, local: str) -> bool:
        """Remove the alias, or its whole line when it is the only name; a line or a name
        that carries a comment is kept (renamed as usual) so that no comment is lost."""
        line = self.ctx.parent(statement)
        if "#" in cst.Module([]).code_for_node(alias) or not isinstance(line, cst.SimpleStatementLine):
            return False
        whole_line = len(statement.names) == 1
        if whole_line and (len(line.body) > 1 or line.trailing_whitespace.comment is not None
                           or any(empty.comment is not None for empty in line.leading_lines)):
            return False
        message = f"removed the import of `{local}`: every use of it is rewritten away from `torch.cuda`"
        if whole_line:
            self.replace(line, cst.RemoveFromParent(), message, requires=self._requires(local))
        else:
            self.replace(statement, _without(alias, statement), message, requires=self._requires(local))
        self.removed.add(alias)
        return True

    def _split(self, statement: cst.ImportFrom, movable: list[cst.ImportAlias], module: str, new_module: str) -> None:
        moved = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in movable]
        names = ", ".join(cst.Module([]).code_for_node(a) for a in moved)
        new_statement = cst.parse_statement(f"from {new_module} import {names}\n")

        def keep_rest(node: cst.ImportFrom) -> cst.ImportFrom:
            kept = [a for a, original in zip(node.names, statement.names) if original not in movable]
            last_comma = node.names[-1].comma if isinstance(node.lpar, cst.LeftParen) else cst.MaybeSentinel.DEFAULT
            kept[-1] = kept[-1].with_changes(comma=last_comma)
            return node.with_changes(names=kept)

        self.replace(statement, keep_rest, f"`from {module} import ...`: names torch_npu has moved to `from {new_module} import ...`")
        self.insert_after(statement, [new_statement], f"`from {new_module} import {names}`", needs_torch_npu=True)

    def _report_kept_alias(self, local: str) -> None:
        """The alias stays because some use has no plain NPU counterpart; say so at the
        uses that would otherwise have been rewritten, so none is left silent."""
        for node, qualified in self.alias_uses.get(local, []):
            target = self.api.npu_name_for_cuda(qualified) if is_cuda_name(qualified) else None
            if target is not None:
                self.report(
                    node,
                    f"`{qualified}` not rewritten: the `{local}` import is also used for names without a plain NPU counterpart",
                    f"use `{target}` here, and migrate the other uses of `{local}` (see the findings on them)",
                )

    def _from_torch_import_cuda(self, alias, local, uses) -> None:
        requires = self._requires(local)
        if alias.asname is None and not _NPU_WORD.search(self.ctx.text):
            self.replace(alias, lambda a: a.with_changes(name=cst.Name("npu")), "`from torch import cuda` -> `from torch import npu`",
                         requires=requires)
            for node, qualified in uses:
                self.replace(_root(node), cst.Name("npu"), f"`{qualified}` -> `torch.npu` via `npu`", needs_torch_npu=True,
                             requires=requires)
        else:
            asname = alias.asname or cst.AsName(name=cst.Name(local))
            self.replace(alias, lambda a: a.with_changes(name=cst.Name("npu"), asname=asname), "`from torch import cuda` -> `from torch import npu`",
                         requires=requires)


def _root(node: cst.CSTNode) -> cst.Name:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node


def _dotted(name: str) -> cst.BaseExpression:
    return cst.parse_expression(name)


def _without(removed: cst.ImportAlias, original: cst.Import | cst.ImportFrom):
    def apply(statement):
        kept = [a for a, o in zip(statement.names, original.names) if o is not removed]
        if original.names[-1] is removed:  # `from torch import nn, cuda`: no dangling comma
            paren = isinstance(statement, cst.ImportFrom) and isinstance(statement.lpar, cst.LeftParen)
            kept[-1] = kept[-1].with_changes(comma=removed.comma if paren else cst.MaybeSentinel.DEFAULT)
        return statement.with_changes(names=kept)

    return apply


def _set_module(module: str):
    def apply(statement: cst.ImportFrom) -> cst.ImportFrom:
        return statement.with_changes(module=_dotted(module))

    return apply
