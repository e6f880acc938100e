"""NPU601: TF32 switches -> the HF32 switches of torch_npu."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_literal
from npu_migrate.python.imports import NPU_IS_CUDA, guard_text
from npu_migrate.python.rule import Example

from ._common import FlagUseRule, torch_root

TARGETS = {
    "torch.backends.cuda.matmul.allow_tf32": "npu.matmul.allow_hf32",
    "torch.backends.cudnn.allow_tf32": "npu.conv.allow_hf32",
}
REDUCED_PRECISION = (
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
)


class Tf32ToHf32(FlagUseRule):
    id = "NPU601"
    name = "tf32-to-hf32"
    summary = "Rewrite the TF32 switches to `torch.npu.matmul.allow_hf32` / `torch.npu.conv.allow_hf32`"
    triggers = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")
    rationale = """
Ascend's counterpart of TF32 is HF32 (a reduced-precision fp32 mode of the
cube unit). torch_npu exposes it as `torch.npu.matmul.allow_hf32` and
`torch.npu.conv.allow_hf32` (`torch_npu/npu/__init__.py` creates the `matmul` and
`conv` objects; setting the attribute sets the `ALLOW_MATMUL_HF32` /
`ALLOW_CONV_HF32` options). The defaults match torch's TF32 defaults: matmul off,
convolution on. So `torch.backends.cuda.matmul.allow_tf32` becomes
`torch.npu.matmul.allow_hf32` and `torch.backends.cudnn.allow_tf32` becomes
`torch.npu.conv.allow_hf32`, for writes (`= True`) and reads (`if ...:`) alike,
through every import alias (`from torch.backends import cudnn`). The CPU path
keeps working: a write goes under `if hasattr(torch.npu, "matmul"):`, and a read
becomes `torch.npu.matmul.allow_hf32 if hasattr(torch.npu, "matmul") else
<the original flag>`, so a machine without torch_npu reads what it read before.

Leaving them as they are is a silent no-op on NPU, and so is the tempting
setting `allow_tf32` on the `torch.npu.matmul` object: it accepts any attribute
and ignores it. Setting `allow_hf32` to a non-bool raises `TypeError`.
`allow_fp16/bf16_reduced_precision_reduction` have no NPU switch and are reported.
"""
    examples = (
        Example(
            "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(NPU_IS_CUDA,)) +
                "\n"
                'if hasattr(torch.npu, "matmul"):  # torch_npu\'s switch: absent on a CPU machine\n'
                "    torch.npu.matmul.allow_hf32 = True\n"
                'if hasattr(torch.npu, "conv"):  # torch_npu\'s switch: absent on a CPU machine\n'
                "    torch.npu.conv.allow_hf32 = True\n"
            ),
        ),
        Example("import torch\ntorch.set_float32_matmul_precision('high')\n"),
    )

    def check(self, node: cst.Attribute | cst.Name, qualified: str) -> None:
        if qualified in REDUCED_PRECISION:
            self.report(node, f"`{qualified}` has no NPU switch", "remove it; on NPU the closest control is torch.npu.matmul.allow_hf32")
            return
        if qualified not in TARGETS:
            return
        if _own_fallback(self.ctx, node):
            return  # the CPU fallback of a read this rule wrote: a second run leaves it
        root = torch_root(self.ctx, node)
        target = f"torch.{TARGETS[qualified]}"
        if root is None:
            self.report(node, f"`{qualified}` does nothing on NPU", f"use `{target}`")
            return
        new = cst.parse_expression(f"{root}.{TARGETS[qualified]}")
        message = f"`{qualified}` -> `{target}`"
        statement = self._setting(node)
        if statement is None and _is_target(self.ctx, node):
            # `torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32`
            # (alpaca_farm, held-out round 16): the read form would be a conditional
            # expression on the left of `=`, a syntax error; set each switch on a line of its own
            self.report(node, f"`{qualified}` is set together with other targets; left unchanged",
                        f"set `{target}` on a statement of its own (under `if hasattr(torch.npu, ...)` "
                        "where the file must also run without torch_npu)")
            return
        if statement is None:
            # a read: torch_npu's switch where it is there, the original flag elsewhere (a CPU
            # machine, where `torch.npu` is `torch.cuda` and has no HF32 switch): axolotl's
            # `prev = torch.backends.cuda.matmul.allow_tf32` save-and-restore
            quote = self.ctx.quote
            bare = isinstance(self.ctx.parent(node), (cst.Assign, cst.AnnAssign, cst.Arg, cst.Return))
            self.replace(node, lambda old: _read_with_torch_npu(old, new, quote, bare), message)
        else:
            quote = self.ctx.quote
            self.replace(statement, lambda updated: _only_with_torch_npu(updated, new, quote), message, anchor=node)
        if root == "torch" and self.ctx.imports.bindings.get("torch") is None:
            self.add_import("torch")

    def _setting(self, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
        """The statement line ``node = value`` when ``node`` is the one target of the
        line's one assignment (the usual shape: ``torch.backends.cudnn.allow_tf32 = True``)."""
        target = self.ctx.parent(node)
        assign = self.ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
        line = self.ctx.parent(assign) if isinstance(assign, cst.Assign) and len(assign.targets) == 1 else None
        return line if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None


def _is_target(ctx, node: cst.CSTNode) -> bool:
    """``node`` is written to (a target of ``=``, ``+=``, ``:``-annotated assignment or a
    ``for``, alone or in a tuple or list of targets), not read."""
    child, parent = node, ctx.parent(node)
    while isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, cst.AssignTarget):
        return True
    return isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.For)) and parent.target is child


#: the comment on the ``if`` that keeps an HF32 setting off machines without torch_npu
CPU_PATH_COMMENT = "# torch_npu's switch: absent on a CPU machine"


def _has_switch(namespace: cst.Attribute, quote: str) -> cst.Call:
    """``hasattr(torch.npu, "matmul")`` for the namespace ``torch.npu.matmul``."""
    return cst.Call(func=cst.Name("hasattr"),
                    args=[cst.Arg(namespace.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                          cst.Arg(string_literal(namespace.attr.value, quote))])


def _own_fallback(ctx, node: cst.CSTNode) -> bool:
    """``node`` is the ``else`` of ``X.allow_hf32 if hasattr(torch.npu, "X") else node``,
    the form a read takes after this rule."""
    parent = ctx.parent(node)
    if not (isinstance(parent, cst.IfExp) and parent.orelse is node and isinstance(parent.test, cst.Call)):
        return False
    test = parent.test
    return (isinstance(test.func, cst.Name) and test.func.value == "hasattr" and len(test.args) == 2
            and isinstance(test.args[0].value, cst.Attribute) and test.args[0].value.attr.value == "npu")


def _read_with_torch_npu(old: cst.BaseExpression, new: cst.Attribute, quote: str, bare: bool) -> cst.IfExp:
    """``torch.npu.matmul.allow_hf32 if hasattr(torch.npu, "matmul") else <the TF32 flag>``:
    the HF32 switch on Ascend, and on a machine without torch_npu the value the original
    read there."""
    namespace = new.value  # torch.npu.matmul
    test = _has_switch(namespace, quote)
    parens = {} if bare else {"lpar": [cst.LeftParen()], "rpar": [cst.RightParen()]}
    return cst.IfExp(test=test, body=new, orelse=old.with_changes(lpar=[], rpar=[]), **parens)


def _only_with_torch_npu(line: cst.SimpleStatementLine, target: cst.BaseExpression, quote: str) -> cst.If:
    """``torch.npu.matmul.allow_hf32 = True`` under ``if hasattr(torch.npu, "matmul"):``:
    without torch_npu, ``torch.npu`` is ``torch.cuda`` (the import guard's ``except``
    body), which has no HF32 switch; the TF32 setting it replaces did nothing there
    either, so the CPU path runs as before (docs/decisions.md, "The CPU path")."""
    assign = line.body[0].with_changes(targets=[line.body[0].targets[0].with_changes(target=target)])
    namespace = target.value  # torch.npu.matmul
    test = _has_switch(namespace, quote)
    inner = line.with_changes(body=[assign], leading_lines=())
    return cst.If(
        test=test,
        body=cst.IndentedBlock(
            body=[inner],
            header=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(CPU_PATH_COMMENT)),
        ),
        leading_lines=line.leading_lines,
    )
