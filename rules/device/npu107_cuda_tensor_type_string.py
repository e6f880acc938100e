"""NPU107: ``'torch.cuda.FloatTensor'`` type strings -> ``'torch.npu.FloatTensor'``."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.python.cst_util import last_name, string_value
from npu_migrate.python.imports import NPU_IS_CUDA, guard_text
from npu_migrate.python.rule import Example, Rule

_TYPE_STRING = re.compile(r"torch\.cuda\.(\w+Tensor)")
_PROSE_CALLS = {"print", "info", "debug", "warning", "warn", "error", "exception", "critical", "log", "write"}


class CudaTensorTypeString(Rule):
    id = "NPU107"
    name = "cuda-tensor-type-string"
    summary = "Rewrite `x.type() == 'torch.cuda.FloatTensor'` and `x.type('torch.cuda.HalfTensor')` to the `torch.npu` type names"
    triggers = ("cuda",)
    rationale = """
Old code tests or casts tensors with legacy type strings: `x.type() ==
'torch.cuda.FloatTensor'`, `x.type('torch.cuda.HalfTensor')`. On Ascend
`Tensor.type()` returns `'torch.npu.FloatTensor'` (torch_npu creates the legacy
`torch.npu.*Tensor` types; its own GradScaler uses `torch.npu.FloatTensor`), so
such strings are rewritten where they are compared with `.type()` or passed to
it. The attribute forms (`torch.cuda.FloatTensor`, `isinstance(x,
torch.cuda.HalfTensor)`) are renamed by NPU101.

Reported instead:
- `'torch.cuda.DoubleTensor'`: float64 is not supported on the NPU (torch_npu's
  own runtime patcher maps `torch.cuda.DoubleTensor` to `torch.npu.FloatTensor`);
- `torch.set_default_tensor_type('torch.cuda.FloatTensor')` (deprecated; use
  `torch.set_default_device('npu')` and `torch.set_default_dtype(...)`);
- the string anywhere else (a dict of type names, ...).
"""
    examples = (
        Example(
            "import torch\nif x.type() == 'torch.cuda.HalfTensor':\n    x = x.type('torch.cuda.FloatTensor')\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(NPU_IS_CUDA,)) +
                "\n"
                "if x.type() == 'torch.npu.HalfTensor':\n"
                "    x = x.type('torch.npu.FloatTensor')\n"
            ),
        ),
        Example("import torch\nprint('expected a torch.cuda.FloatTensor')\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        self.qualified_name(node.func)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is None or "torch.cuda." not in value:
            return
        match = _TYPE_STRING.fullmatch(value)
        verdict = self._classify(node) if match else "prose"
        if verdict == "prose":
            return
        target = load_api().npu_name_for_cuda(value)
        if verdict == "rewrite" and target is not None:
            self.replace(node, _swap, f"'{value}' -> '{target}'")
            return
        if target is None:
            reason = load_api().unusable_reason(value.replace("torch.cuda.", "torch.npu.", 1))
            suggestion = reason or "torch_npu has no such tensor type; use `x.to('npu', dtype=...)`"
            if match.group(1) == "DoubleTensor":
                suggestion = "float64 is not supported on the NPU: use 'torch.npu.FloatTensor' (torch.float32) if the precision allows"
        else:
            suggestion = (
                "use torch.set_default_device('npu') and torch.set_default_dtype(...)"
                if verdict == "default"
                else f"if it names a tensor type, write '{target}'"
            )
        self.report(node, f"'{value}' names a CUDA tensor type; left unchanged", suggestion)

    def _classify(self, node: cst.SimpleString) -> str:
        ctx = self.ctx
        current: cst.CSTNode = node
        parent = ctx.parent(current)
        while isinstance(parent, cst.Element):  # in a tuple/list/set
            current = ctx.parent(parent)
            parent = ctx.parent(current)
        if isinstance(parent, cst.Expr):
            return "prose"
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            comparison = parent if isinstance(parent, cst.Comparison) else ctx.parent(parent)
            operands = [comparison.left, *(t.comparator for t in comparison.comparisons)]
            return "rewrite" if any(_is_type_call(o) for o in operands if o is not current) else "other"
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call):
                return "other"
            callee = last_name(call.func)
            if callee in _PROSE_CALLS or str(callee).endswith(("Error", "Exception", "Warning")):
                return "prose"
            if self.qualified_name(call.func) == "torch.set_default_tensor_type":
                return "default"
            if callee == "type" and isinstance(call.func, cst.Attribute) and current is parent.value:
                return "rewrite"
        return "other"


def _is_type_call(node: cst.CSTNode) -> bool:
    """``x.type()`` (the type string of a tensor), possibly inside ``str(...)``."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "type"
        and not node.args
    )


def _swap(node: cst.SimpleString) -> cst.SimpleString:
    return node.with_changes(value=node.value.replace("torch.cuda.", "torch.npu.", 1))
