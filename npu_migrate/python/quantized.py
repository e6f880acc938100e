"""Code that always loads its model through bitsandbytes cannot run on Ascend (no released
bitsandbytes wheel has an Ascend backend: NPU925), so its device code is left as it is
until the quantization is dropped, as a module that cannot be imported is (NPU011).

The scope is the function (or, for code outside any function, the module's top level:
a script's or a notebook's body) in which a loading call quantizes unconditionally:

* ``from_pretrained(..., load_in_8bit=True)`` (a literal ``True``; alpaca-lora's
  ``finetune.py``), or
* ``quantization_config=BitsAndBytesConfig(...)`` passed straight to ``from_pretrained``,
  or through a name assigned from that call in the same scope;

(when that function is a class's ``__init__``, the whole class: every object of it holds
the quantized model, as llama-cookbook's ``LlamaGuardSafetyChecker``)

and neither the call nor the argument sits under an ``if``, a conditional expression, a
``try``, a loop or a boolean operator. Where the project's own switch decides
(``load_in_4bit=args.bits == 4``, ``... if use_4bit else None``), other paths may run on
Ascend, so nothing is left for it (held-out rounds 15 and 17: 8 needless hunks in
alpaca-lora and llama-cookbook). The NPU925 finding then says that the scope's device
code was left.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import last_name
from npu_migrate.python.records import FindingRecord

QUANTIZE_RULE = "NPU925"
#: Ancestors under which a call runs only on some paths.
_CONDITIONAL = (cst.If, cst.IfExp, cst.Try, cst.For, cst.While, cst.BooleanOperation, cst.Lambda,
                cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Match)
_KEYWORDS = ("load_in_4bit", "load_in_8bit")


def quantized_scopes(ctx: FileContext, findings: list[FindingRecord]
                     ) -> tuple[list[tuple[int, int]], list[FindingRecord]]:
    """``(first line, last line)`` of each scope that always quantizes (a module's spans
    leave out its functions and classes), and ``findings`` with those of its quantizing
    calls saying which scope."""
    held: list[tuple[int, int]] = []
    rewritten = list(findings)
    for index, finding in enumerate(findings):
        if finding.rule != QUANTIZE_RULE:
            continue
        call = _loading_call(ctx, finding.node)
        if call is None:
            continue
        scope = _unconditional_scope(ctx, call)
        if scope is None:
            continue
        owner = _class_of(ctx, scope)
        if owner is not None:  # every object of the class holds the quantized model
            scope = owner
        held += _spans(ctx, scope)
        what = "this module's top level" if isinstance(scope, cst.Module) else f"`{scope.name.value}`"
        rewritten[index] = replace(finding, message=f"{finding.message}; {what} always loads the model this way, so its device "
                                   "code is left unchanged (drop the quantization, then run npu-migrate again)")
    return held, rewritten


def _loading_call(ctx: FileContext, node: cst.CSTNode) -> cst.Call | None:
    """The call that loads the model quantized, for an NPU925 finding's node."""
    if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in _KEYWORDS:
        owner = ctx.parent(node)
        return owner if _loads(owner) else None
    if not (isinstance(node, cst.Call) and last_name(node.func) == "BitsAndBytesConfig"):
        return None
    holder = ctx.parent(node)
    if isinstance(holder, cst.Arg):  # quantization_config=BitsAndBytesConfig(...)
        owner = ctx.parent(holder)
        return owner if _loads(owner) else None
    assign = ctx.parent(holder) if isinstance(holder, cst.AssignTarget) else holder
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0].target, cst.Name)):
        return None
    if _unconditional_scope(ctx, node) is None:
        return None
    name = assign.targets[0].target.value
    scope = _scope(ctx, node)
    for call in _calls(scope):  # quantization_config=bnb_config, in the same scope
        if (_loads(call) and any(isinstance(a.value, cst.Name) and a.value.value == name for a in call.args)
                and _scope(ctx, call) is scope):
            return call
    return None


def _loads(call: cst.CSTNode | None) -> bool:
    """A model's loading call: ``X.from_pretrained(...)``. A config dict that names the
    quantization (xtuner's ``quantization_config=dict(type=BitsAndBytesConfig,
    load_in_4bit=True)``) is not one: what loads it, and whether, is another program's
    business (the precision corpus: 427 correct backend edits in xtuner's configs)."""
    return isinstance(call, cst.Call) and last_name(call.func) == "from_pretrained"


def _class_of(ctx: FileContext, scope: cst.CSTNode) -> cst.ClassDef | None:
    """The class whose ``__init__`` ``scope`` is."""
    if not (isinstance(scope, cst.FunctionDef) and scope.name.value == "__init__"):
        return None
    body = ctx.parent(scope)
    owner = ctx.parent(body) if body is not None else None
    return owner if isinstance(owner, cst.ClassDef) else None


def _scope(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode:
    return next((a for a in ctx.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.ClassDef))), ctx.module)


def _unconditional_scope(ctx: FileContext, node: cst.CSTNode) -> cst.CSTNode | None:
    """The function (or module) in which ``node`` runs whenever it runs; None when it sits
    under a condition there, or in a class body."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.If) and _is_main_test(ancestor.test):
            continue  # a script's main path
        if isinstance(ancestor, (*_CONDITIONAL, cst.ClassDef)):
            return None
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor
    return ctx.module


def _is_main_test(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"``."""
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__"
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)
            and isinstance(test.comparisons[0].comparator, cst.SimpleString)
            and test.comparisons[0].comparator.evaluated_value == "__main__")


def _calls(scope: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope  # not into nested functions

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

    scope.visit(Calls())
    return found


def _spans(ctx: FileContext, scope: cst.CSTNode) -> list[tuple[int, int]]:
    if isinstance(scope, (cst.FunctionDef, cst.ClassDef)):
        where = ctx.position(scope)
        return [(where.start.line, where.end.line)]
    spans = []
    for statement in scope.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            continue
        where = ctx.position(statement)
        spans.append((where.start.line, where.end.line))
    return spans
