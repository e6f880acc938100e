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

A class counts when it is itself skipped, or when it has test methods and every one
of them is skipped: then its decorators (a ``skipUnless(torch.cuda...)`` gate over
tests that never run) go too, but not its other methods, which a subclass's tests
may still call. ``skipIf``/``skipUnless``/``skipif`` are conditions, never counted here.
"""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.context import FileContext

#: qualified names of the unconditional skip decorators and calls
_SKIP_DECORATORS = frozenset({"unittest.skip", "unittest.case.skip", "pytest.mark.skip", "_pytest.mark.skip"})
_SKIP_CALLS = frozenset({"pytest.skip", "_pytest.outcomes.skip", "unittest.SkipTest", "unittest.case.SkipTest"})

Span = tuple[int, int]


def never_run_spans(ctx: FileContext) -> list[Span]:
    """Line spans (first, last; decorators included) of the file's code that no test
    run executes."""
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
            spans.append(_span(ctx, statement))
        elif isinstance(statement, cst.ClassDef):
            if marked and statement.name.value.startswith("Test"):
                spans.append(_span(ctx, statement))
            else:
                spans.extend(_class_spans(ctx, statement))
    return spans


def _class_spans(ctx: FileContext, cls: cst.ClassDef) -> list[Span]:
    if any(_is_skip_decorator(ctx, d) for d in cls.decorators):
        return [_span(ctx, cls)]
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]
    tests = [m for m in methods if m.name.value.startswith("test")]
    skipped = [m for m in tests if _never_runs(ctx, m)]
    spans = [_span(ctx, m) for m in skipped]
    if tests and len(skipped) == len(tests) and cls.decorators:
        spans.append((ctx.position(cls.decorators[0]).start.line, ctx.position(cls.decorators[-1]).end.line))
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
    if statements and _is_docstring(statements[0]):
        statements = statements[1:]
    return statements[0] if statements else None


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _span(ctx: FileContext, owner: cst.FunctionDef | cst.ClassDef) -> Span:
    where = ctx.position(owner)
    first = min([ctx.position(d).start.line for d in owner.decorators] + [where.start.line])
    return first, where.end.line
