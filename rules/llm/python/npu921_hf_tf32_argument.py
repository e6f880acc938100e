"""NPU921: ``TrainingArguments(tf32=True)`` -> the argument removed."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import last_name, string_value
from npu_migrate.python.rule import Example, Rule

from ._common import without_keyword

#: transformers' TrainingArguments and its subclasses (Seq2SeqTrainingArguments, trl's
#: SFTConfig/DPOConfig/GRPOConfig, project subclasses such as LLaVA's TrainingArguments).
_ARGUMENTS = re.compile(r"\w*(TrainingArguments|Arguments|Config|Args)")
_LIBRARIES = ("transformers.", "trl.", "optimum.", "peft.")

HF32 = (
    "if the run relied on TF32 speed for fp32 matmuls, set torch.npu.matmul.allow_hf32 = True "
    "(Ascend's HF32, default off) after import torch_npu"
)


class HfTf32Argument(Rule):
    id = "NPU921"
    name = "hf-tf32-argument"
    summary = "Remove `tf32=True` from `TrainingArguments(...)` (transformers raises without CUDA)"
    triggers = ("tf32",)
    fixable = True
    rationale = f"""
`TrainingArguments(tf32=True)` makes transformers call `enable_tf32(True)` when
`is_torch_tf32_available()`, and otherwise raise `ValueError: --tf32 requires
Ampere or a newer GPU arch, cuda>=11 and torch>=1.7` (`training_args.py`,
`__post_init__`; the same in transformers 4.37.2, 4.57 and 5.24.0). That check
is CUDA-only: there is no NPU exception for tf32 (there is one for bf16), so
every job that passes `tf32=True` dies in argument parsing on Ascend. Without
the argument (`tf32=None`) transformers leaves the matmul precision alone,
which on NPU means full fp32 unless HF32 is switched on.

The keyword is removed from calls of `TrainingArguments` and its relatives
(`Seq2SeqTrainingArguments`, trl's `SFTConfig`, project subclasses named
`...Arguments`/`...Config`/`...Args`, or anything imported from transformers,
trl, optimum or peft). `tf32=False` is left alone (it raises nothing). The
launchers' `--tf32 True` is NPU935's, config files' `tf32: true` NPU941's.

Set outside a call — `training_args.tf32 = True`, `args.tf32 = True` on an
argparse namespace later unpacked into `TrainingArguments(**vars(args))`,
`kwargs["tf32"] = True`, `setattr(args, "tf32", True)` — the `True` becomes
`False` (one literal; the statement stays, so no block is left empty) in files
that import transformers, trl, optimum or peft. `False` is what transformers
does on NPU anyway (`enable_tf32(False)` only runs where TF32 exists) and
raises nowhere; `True` raises wherever the object passes through
`__post_init__` again (`dataclasses.replace`, re-construction from a dict). A
file that also reads `.tf32` itself (`allow_tf32 = args.tf32`) uses the flag
for its own purpose, so there the assignment is reported, not changed. A plain
variable (`tf32 = True`) is left alone.
HF32: {HF32}.
"""
    examples = (
        Example(
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out', bf16=True, tf32=True)\n",
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out', bf16=True)\n",
        ),
        Example(
            "from transformers import HfArgumentParser\nargs = parse()\nargs.tf32 = True\n",
            "from transformers import HfArgumentParser\nargs = parse()\nargs.tf32 = False\n",
        ),
        Example("from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out', tf32=False)\n"),
        Example("args = parse()\nargs.tf32 = True\n"),
    )

    def visit_Module(self, node: cst.Module) -> None:
        imports = self.ctx.imports
        self._hf = any(imports.imports_module(m.rstrip(".")) for m in _LIBRARIES)
        self._reads_flag = _reads_tf32(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._hf or not _is_true(node.value):
            return
        target = next((t.target for t in node.targets if _flag_target(t.target)), None)
        if target is not None:
            self._set_outside(node.value, target)

    def _set_outside(self, value: cst.Name, where: cst.CSTNode) -> None:
        if self._reads_flag:
            self.report(where, "`tf32` set to True: transformers raises without CUDA if this reaches "
                        "TrainingArguments, but the file also reads `.tf32` itself",
                        f"set it to False (or drop it) where it is meant for TrainingArguments; {HF32}")
            return
        self.replace(value, cst.Name("False"),
                     f"`tf32 = True` set to False: transformers raises without CUDA; {HF32}",
                     needs_torch_npu=False, anchor=where)

    def visit_Call(self, node: cst.Call) -> None:
        if self._hf and _is_setattr_tf32(node):
            self._set_outside(node.args[2].value, node)
            return
        arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "tf32"), None)
        if arg is None or not (isinstance(arg.value, cst.Name) and arg.value.value == "True"):
            return
        qualified = self.qualified_name(node.func) or ""
        name = last_name(node.func) or ""
        if not (qualified.startswith(_LIBRARIES) or _ARGUMENTS.fullmatch(name)):
            return
        self.replace(node, lambda n: without_keyword(n, "tf32"),
                     f"`tf32=True` removed from `{name}(...)`: transformers raises without CUDA; {HF32}",
                     needs_torch_npu=False, anchor=arg)


def _is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _flag_target(target: cst.BaseExpression) -> bool:
    """``obj.tf32`` / ``obj.a.tf32`` / ``d["tf32"]`` (not a plain variable)."""
    if isinstance(target, cst.Attribute):
        return target.attr.value == "tf32"
    if isinstance(target, cst.Subscript) and len(target.slice) == 1:
        index = target.slice[0].slice
        return isinstance(index, cst.Index) and string_value(index.value) == "tf32"
    return False


def _is_setattr_tf32(call: cst.Call) -> bool:
    """``setattr(obj, "tf32", True)``."""
    return (isinstance(call.func, cst.Name) and call.func.value == "setattr" and len(call.args) == 3
            and all(a.keyword is None and a.star == "" for a in call.args)
            and string_value(call.args[1].value) == "tf32" and _is_true(call.args[2].value))


class _Tf32Reads(cst.CSTVisitor):
    """Whether a module reads ``X.tf32`` (a load, not an assignment target) or
    ``getattr(X, "tf32")``."""

    def __init__(self) -> None:
        self.found = False
        self._targets: set[cst.CSTNode] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets.add(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets.add(node.target)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "tf32" and node not in self._targets:
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        if (isinstance(node.func, cst.Name) and node.func.value == "getattr" and len(node.args) >= 2
                and string_value(node.args[1].value) == "tf32"):
            self.found = True


def _reads_tf32(module: cst.Module) -> bool:
    reads = _Tf32Reads()
    module.visit(reads)
    return reads.found
