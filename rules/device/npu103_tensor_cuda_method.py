"""NPU103: ``x.cuda(...)`` -> ``x.npu(...)`` and ``x.is_cuda`` -> ``x.is_npu``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from npu_migrate.python import reaches_torch
from npu_migrate.python.cst_util import string_literal
from npu_migrate.python.cuda_only import enclosing_function
from npu_migrate.python.imports import IS_NPU_IS_CUDA, guard_text
from npu_migrate.python.rule import Example, Rule

#: the module itself, not a method of a tensor or module
_MODULES = ("torch.cuda",)
#: libraries whose containers define their own ``.cuda()`` and no ``.npu()`` (torch_npu adds
#: ``npu`` to tensors, modules and storages only): tensordict's ``TensorDict`` (verl's
#: ``TensorDict(data, batch_size=...).cuda()``, held-out round 20), PyG's ``Data``/``Batch``
_OWN_CUDA_METHOD = frozenset({"tensordict", "torch_geometric"})


class TensorCudaMethod(Rule):
    id = "NPU103"
    name = "tensor-cuda-method"
    summary = "Rewrite `x.cuda(...)` to `x.npu(...)` and `x.is_cuda` to `x.is_npu`"
    triggers = ("cuda", "is_cuda")
    rationale = """
torch_npu registers `Tensor.npu`, `Module.npu`, `PackedSequence.npu`, the
storages' `npu` and the `Tensor.is_npu` property (through torch's
`generate_methods_for_privateuse1_backend`). They take the same arguments as
their CUDA twins: a device (an index, `'npu:N'` or a `torch.device`),
`non_blocking` and `memory_format`, so arguments are kept as they are
(`x.cuda(args.gpu, non_blocking=True)` -> `x.npu(args.gpu, non_blocking=True)`;
an index means "NPU number N").

Any receiver counts: in training code a `.cuda(...)` call is the tensor or
module method, and the vendor's own runtime patcher aliases exactly these
(`Tensor.cuda` -> `Tensor.npu`, `Module.cuda` -> `Module.npu`, `is_cuda` ->
`is_npu`). Left alone:
- `torch.cuda` itself (the module; NPU101 handles it);
- an attribute `x.cuda` that is *not called* (often a flag such as
  `self.cuda = torch.cuda.is_available()`), except `torch.Tensor.cuda` /
  `torch.nn.Module.cuda` named through torch;
- calls of an `is_cuda()` method (a user-defined helper, not the tensor
  property): reported;
- `.cuda()` of an object built in the same expression by a library whose
  containers have their own `.cuda()` and no `.npu()` (tensordict's
  `TensorDict(...).cuda()`, PyG's `Data(...).cuda()`): reported, with `.to("npu")`.

In a project that imports tensordict or PyG anywhere, such containers reach code far
from where they are built (verl's `data.batch = data.batch.cuda()`, the batch a
`TensorDict` held by its `DataProto`), so there every `.cuda()` becomes
`.to("npu")`, which tensors, modules and those containers all accept (keywords such
as `non_blocking` are kept); a `.cuda(N)` or `.cuda(device=...)` with a device
argument is reported.

Each `.is_cuda` read goes through the shared analysis
(`npu_migrate/python/reaches_torch.py`): a read of another system's object is
reported, and a test guarding CUDA-only code (Triton, Helion, compiled
extensions, custom ops) is a kernel gate that the engine keeps (NPU011).

A class in the file that defines its own `cuda()` (or `is_cuda`) is reported:
calls rewritten to `.npu()` no longer reach that method, so give the class an
`npu` method too.

A `.cuda()` call on an object of such a class of the project (any file: a batch class
that moves its own tensors, with no `npu()`) stays and is reported, where the call is
typed as one: the receiver is annotated with the class (`data: Batch`, a parameter or a
bare annotation), built by it (`Batch(...)`, `Batch.gather(...)`), or returned by a
function annotated to return it (`make_batches(...)[0]`, a loop over that list).
`.npu()` there raised AttributeError on every machine.
"""
    examples = (
        Example(
            "import torch\nmodel = Net().cuda()\nfor x, y in loader:\n    x = x.cuda(non_blocking=True)\n",
            (
                "import torch\n"
                "\n"
                + guard_text() +
                "\n"
                "model = Net().npu()\n"
                "for x, y in loader:\n"
                "    x = x.npu(non_blocking=True)\n"
            ),
        ),
        Example(
            "import torch\nif images.is_cuda:\n    images = images.cuda(args.gpu)\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(IS_NPU_IS_CUDA,)) +
                "\n"
                "if images.is_npu:\n"
                "    images = images.npu(args.gpu)\n"
            ),
        ),
        Example("import torch\nself.cuda = torch.cuda.is_available()\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        attr = func.attr.value
        if attr == "cuda":
            if self.qualified_name(func) in _MODULES:
                return
            if isinstance(func.value, cst.Call):
                owner = (self.qualified_name(func.value.func) or "").split(".")[0]
                if owner in _OWN_CUDA_METHOD:
                    self.report(node, f"`.cuda()` of a {owner} object built here: {owner} defines its own `.cuda()` and "
                                "no `.npu()`; left unchanged", 'write `.to("npu")` (its `.to` takes any device)')
                    return
            own = self._own_cuda_receiver(func.value)
            if own is not None:
                self.report(node, f"`.cuda()` of {own}, a class of this project with its own `.cuda()` and no "
                            "`.npu()`; left unchanged (`.npu()` would raise AttributeError on every machine)",
                            "give the class an `npu()` method (its `cuda()` with `.npu()` inside), then call that here")
                return
            containers = sorted(self.ctx.facts.container_libraries)
            if containers:
                # the receiver may be one of those containers (verl's `data.batch.cuda()`):
                # `.to("npu")` serves tensors, modules and the containers alike
                shown = " and ".join(containers)
                if any(arg.keyword is None or arg.keyword.value == "device" for arg in node.args):
                    self.report(node, f"the project uses {shown}, whose containers have `.cuda()` and no `.npu()`, and "
                                "this receiver's type is not known here; left unchanged",
                                'write `.to("npu:N")` (tensors, modules and those containers all take it)')
                    return
                self.replace(node, _to_npu(self.ctx.quote), '`.cuda()` -> `.to("npu")`',
                             reason=f"the project uses {shown}, whose containers have their own `.cuda()` and no "
                                    "`.npu()`; `.to(\"npu\")` serves tensors, modules and those containers alike")
                return
            self.replace(func, _rename("npu"), "`.cuda(...)` -> `.npu(...)`",
                         reason="a called `.cuda(...)` on any receiver is Tensor.cuda / Module.cuda in training code; "
                                "torch_npu adds `.npu(...)` with the same arguments")
        elif attr == "is_cuda":
            self.report(
                node,
                "`is_cuda()` is called like a method: a helper of this project, not the tensor property; left unchanged",
                "make the helper also accept NPU tensors (`t.is_npu`), or test `t.device.type == 'npu'`",
            )

    def _own_cuda_receiver(self, receiver: cst.BaseExpression) -> str | None:
        """``a `SequenceSample` `` when ``receiver`` is typed as a class of the project that
        defines its own ``cuda()`` (:attr:`ProjectFacts.own_cuda_classes`): annotated so
        (``data: SequenceSample``, a parameter or a bare annotation in the function),
        built by it (``SequenceSample(...)``, ``SequenceSample.gather(...)``), or returned
        by a function annotated to return it (``make_batches(...)[0]``, a loop over that
        list). ReaLHF's ``data.cuda()`` became ``data.npu()``, which its class lacks."""
        classes = self.ctx.facts.own_cuda_classes
        if not classes:
            return None
        typed = _typed(receiver, classes, self.ctx.facts.own_cuda_returns)
        if typed is not None:
            return typed
        if not isinstance(receiver, cst.Name):
            return None
        tree = self.ctx.python_ast()  # the whole file: elision may leave out the annotations
        if tree is None:
            return None
        scope = enclosing_function(tree, self.ctx.position(receiver).start.line)
        return _bound_to_own_class(scope, receiver.value, classes, self.ctx.facts.own_cuda_returns)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.is_cuda_reads: list[cst.Attribute] = []
        self.own_is_cuda: set[str] = set()  # receivers that assign their own `.is_cuda`

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.ctx.parent(node)
        called = isinstance(parent, cst.Call) and parent.func is node
        attr = node.attr.value
        if attr == "is_cuda" and not called:
            if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)) and getattr(parent, "target", None) is node:
                # `self.is_cuda = ...`: an attribute of the project's own, not the tensor property
                self.own_is_cuda.add(self.ctx.module.code_for_node(node.value))
                self.report(
                    node,
                    "this object defines its own `is_cuda` attribute; it and its reads are left unchanged",
                    "if it means 'on the accelerator', compute it from the NPU (`device.type == 'npu'`) and rename it",
                )
                return
            self.is_cuda_reads.append(node)
        elif attr == "cuda" and not called:
            qualified = self.qualified_name(node)
            if qualified in ("torch.Tensor.cuda", "torch.nn.Module.cuda"):
                self.replace(node, _rename("npu"), f"`{qualified}` -> `{qualified[:-4]}npu`")

    def leave_file(self) -> None:
        for node in self.is_cuda_reads:
            receiver = self.ctx.module.code_for_node(node.value)
            if receiver in self.own_is_cuda:
                self.report(
                    node,
                    f"`{receiver}.is_cuda` reads this project's own attribute; left unchanged",
                    "rename the attribute and its reads together if it should follow the NPU",
                )
            elif (flow := reaches_torch.analysis(self.ctx).device_test(node))[0] is not reaches_torch.Flow.TORCH:
                self.report(node, f"{flow[1]}; left unchanged",
                            "check what that object's `is_cuda` means on Ascend")
            else:
                self.replace(node, _rename("is_npu"), "`.is_cuda` -> `.is_npu`",
                             reason="reads the tensor property `is_cuda` (no class here assigns its own `is_cuda`); "
                                    "torch_npu adds `Tensor.is_npu`")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value not in ("cuda", "is_cuda"):
            return
        if not any(isinstance(a, cst.ClassDef) for a in self.ctx.ancestors(node)):
            return
        new = "npu" if node.name.value == "cuda" else "is_npu"
        self.report(
            node.name,
            f"this class defines its own `{node.name.value}`; calls rewritten to `.{new}` will not reach it",
            f"add `{new} = {node.name.value}` in the class body (or rename the method to `{new}`)",
        )


def _named(annotation: ast.AST | None, classes: frozenset[str]) -> str | None:
    text = ast.unparse(annotation) if annotation is not None else ""
    return next((f"a `{c}`" for c in sorted(classes) if re.search(rf"\b{re.escape(c)}\b", text)), None)


def _call_name(node: ast.AST) -> str | None:
    """``f`` of ``f(...)``, ``obj.f(...)``."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _root_name(node: ast.AST) -> str | None:
    """``Cls`` of ``Cls(...)`` and ``Cls.gather(...)``."""
    func = node.func if isinstance(node, ast.Call) else None
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


def _typed_ast(value: ast.AST, classes: frozenset[str], returns: frozenset[str]) -> str | None:
    if _root_name(value) in classes:
        return f"a `{_root_name(value)}`"
    if isinstance(value, ast.Subscript) and _call_name(value.value) in returns:
        return f"an item of `{_call_name(value.value)}()`, which returns {', '.join(sorted(classes))} objects"
    if _call_name(value) in returns:
        return f"`{_call_name(value)}()`'s result, annotated as one"
    return None


def _typed(value: cst.BaseExpression, classes: frozenset[str], returns: frozenset[str]) -> str | None:
    """``SequenceSample(...)``, ``SequenceSample.gather(...)``, ``make_batches(...)[0]``."""
    try:
        tree = ast.parse(cst.Module(body=[]).code_for_node(value).strip(), mode="eval").body
    except SyntaxError:
        return None
    return _typed_ast(tree, classes, returns)


def _bound_to_own_class(scope: ast.AST, name: str, classes: frozenset[str], returns: frozenset[str]) -> str | None:
    """What binds ``name`` in ``scope`` to a class of :attr:`ProjectFacts.own_cuda_classes`:
    its annotation, its value, or a loop over a list such a class's function returns."""
    lists = {t.id for node in ast.walk(scope) if isinstance(node, ast.Assign) and _call_name(node.value) in returns
             for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(scope):
        if (isinstance(node, ast.arg) and node.arg == name) or (
                isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name):
            found = _named(node.annotation, classes)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = _typed_ast(node.value, classes, returns)
        elif isinstance(node, (ast.For, ast.comprehension)) and any(
                isinstance(t, ast.Name) and t.id == name for t in ast.walk(node.target)):
            iterable = node.iter
            if isinstance(iterable, ast.Call) and _call_name(iterable) == "enumerate" and iterable.args:
                iterable = iterable.args[0]
            listed = _call_name(iterable) in returns or (isinstance(iterable, ast.Name) and iterable.id in lists)
            found = f"an item of a list of {min(classes)} objects" if listed else None
        else:
            continue
        if found is not None:
            return found
    return None


def _to_npu(quote: str):
    """``x.cuda(non_blocking=True)`` -> ``x.to("npu", non_blocking=True)``."""
    def apply(call: cst.Call) -> cst.Call:
        func = call.func.with_changes(attr=call.func.attr.with_changes(value="to"))
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if call.args else cst.MaybeSentinel.DEFAULT
        device = cst.Arg(value=string_literal("npu", quote), comma=comma)
        return call.with_changes(func=func, args=[device, *call.args])

    return apply


def _rename(name: str):
    def apply(attribute: cst.Attribute) -> cst.Attribute:
        return attribute.with_changes(attr=attribute.attr.with_changes(value=name))

    return apply
