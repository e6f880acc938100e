"""Test code that never runs: what an unconditional skip switches off.

A test decorated with ``@unittest.skip(...)`` or ``@pytest.mark.skip(...)``, one whose
first statement is ``pytest.skip(...)`` / ``self.skipTest(...)`` / ``raise
unittest.SkipTest(...)``, every test (``test*`` function, ``Test*`` class) of a module
marked ``pytestmark = pytest.mark.skip(...)``, and whatever follows a module-level
``pytest.skip(..., allow_module_level=True)`` run on no machine (a marked module's other code still runs
when pytest collects it, so it is migrated as usual): migrating it is a hunk that serves
nothing (round 8: open-instruct's FSDP2/vLLM broadcast test, skipped "needs
multi-GPU", had its backend, placement group and class gate rewritten). The engine
drops every edit and finding inside such code (``engine._filter``), so the file is
left as it is, ``import torch_npu`` included when nothing else is migrated.

What is left alone is what runs only when a test runs: the bodies of skipped tests
(all methods of a skipped class). Code that runs when pytest imports the module stays
migrated: module-level statements, class bodies, helpers (another module may import
them), and decorators, except those whose only CUDA calls are ``is_available()`` /
``device_count()``, which are safe to leave on any machine (a class whose every test
is skipped keeps its ``skipUnless(torch.cuda.is_available())`` gate as written).
``skipIf``/``skipUnless``/``skipif`` are conditions, never counted here.
"""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import is_docstring

#: qualified names of the unconditional skip decorators and calls
_SKIP_DECORATORS = frozenset({"unittest.skip", "unittest.case.skip", "pytest.mark.skip", "_pytest.mark.skip"})
_SKIP_CALLS = frozenset({"pytest.skip", "_pytest.outcomes.skip", "unittest.SkipTest", "unittest.case.SkipTest"})

Span = tuple[int, int]
#: CUDA calls that answer without CUDA (False, 0), and any other CUDA word
_SAFE_CUDA = re.compile(r"\btorch\.cuda\.(?:is_available|device_count)\(\)")
_UNSAFE_CUDA = re.compile(r"\bcuda\.|\.cuda\(")


def never_run_spans(ctx: FileContext) -> list[Span]:
    """Line spans (first, last) of the file's code that no test run executes."""
    if "skip" not in ctx.text and "Skip" not in ctx.text:
        return []  # every skip this reads is spelled so in the file (its import, at least)
    spans: list[Span] = []
    body = ctx.module.body
    marked = any(_marks_module(ctx, s) for s in body)  # pytestmark: every test skipped
    for index, statement in enumerate(body):
        if _is_skip_statement(ctx, statement, module_level=True):
            if index + 1 < len(body):  # nothing after it runs, not even at collection
                spans.append((ctx.position(body[index + 1]).start.line, ctx.position(body[-1]).end.line))
            break
        if isinstance(statement, cst.FunctionDef) and (_never_runs(ctx, statement) or (
                marked and statement.name.value.startswith("test"))):
            spans.extend(_function_spans(ctx, statement))
        elif isinstance(statement, cst.ClassDef):
            spans.extend(_class_spans(ctx, statement, marked and statement.name.value.startswith("Test")))
    return spans


def _class_spans(ctx: FileContext, cls: cst.ClassDef, marked: bool) -> list[Span]:
    """The bodies of the class's skipped tests (all of its methods when the class itself
    is skipped), and its decorators when none of its tests runs. Statements in the
    class body run when the module is imported, and stay migrated."""
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]
    if marked or any(_is_skip_decorator(ctx, d) for d in cls.decorators):
        return [span for m in methods for span in _function_spans(ctx, m)] + _safe_decorators(ctx, cls)
    tests = [m for m in methods if m.name.value.startswith("test")]
    skipped = [m for m in tests if _never_runs(ctx, m)]
    spans = [span for m in skipped for span in _function_spans(ctx, m)]
    if tests and len(skipped) == len(tests):
        spans += _safe_decorators(ctx, cls)
    return spans


def _function_spans(ctx: FileContext, function: cst.FunctionDef) -> list[Span]:
    """The function's body, and those of its decorators that are safe to leave."""
    spans = _safe_decorators(ctx, function)
    if isinstance(function.body, cst.IndentedBlock) and function.body.body:
        spans.append((ctx.position(function.body.body[0]).start.line, ctx.position(function).end.line))
    return spans


def _safe_decorators(ctx: FileContext, owner: cst.FunctionDef | cst.ClassDef) -> list[Span]:
    """Decorators run when the module is imported, skipped test or not: one is left as
    it is only where that is safe on every machine, i.e. its only CUDA calls are
    ``torch.cuda.is_available()`` / ``device_count()`` (False / 0 without CUDA), not a
    capability probe that raises there."""
    spans = []
    for decorator in owner.decorators:
        code = ctx.module.code_for_node(decorator)
        if not _UNSAFE_CUDA.search(_SAFE_CUDA.sub("", code)):
            where = ctx.position(decorator)
            spans.append((where.start.line, where.end.line))
    return spans


def _never_runs(ctx: FileContext, function: cst.FunctionDef) -> bool:
    if any(_is_skip_decorator(ctx, d) for d in function.decorators):
        return True
    first = _first_statement(function)
    return first is not None and _is_skip_statement(ctx, first, module_level=False)


def _marks_module(ctx: FileContext, statement: cst.CSTNode) -> bool:
    """``pytestmark = pytest.mark.skip(...)`` (or a list holding one)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if not (isinstance(small, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == "pytestmark" for t in small.targets)):
        return False
    value = small.value
    marks = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
    return any(_is_skip_mark(ctx, m) for m in marks)


def _is_skip_statement(ctx: FileContext, statement: cst.CSTNode, *, module_level: bool) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or not statement.body:
        return False
    small = statement.body[0]
    if isinstance(small, cst.Raise) and small.exc is not None:
        raised = small.exc.func if isinstance(small.exc, cst.Call) else small.exc
        return not module_level and ctx.qualified_name(raised) in _SKIP_CALLS
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return False
    call = small.value
    if module_level:
        allowed = any(a.keyword is not None and a.keyword.value == "allow_module_level"
                      and isinstance(a.value, cst.Name) and a.value.value == "True" for a in call.args)
        return allowed and ctx.qualified_name(call.func) in _SKIP_CALLS
    if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "skipTest"
            and isinstance(call.func.value, cst.Name) and call.func.value.value == "self"):
        return True
    return ctx.qualified_name(call.func) in _SKIP_CALLS


def _is_skip_decorator(ctx: FileContext, decorator: cst.Decorator) -> bool:
    return _is_skip_mark(ctx, decorator.decorator)


def _is_skip_mark(ctx: FileContext, expression: cst.BaseExpression) -> bool:
    target = expression.func if isinstance(expression, cst.Call) else expression
    return ctx.qualified_name(target) in _SKIP_DECORATORS


def _first_statement(function: cst.FunctionDef) -> cst.BaseStatement | None:
    if not isinstance(function.body, cst.IndentedBlock):
        return None
    statements = list(function.body.body)
    if statements and is_docstring(statements[0]):
        statements = statements[1:]
    return statements[0] if statements else None
