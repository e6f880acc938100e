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
migrated: module-level statements, class bodies, helpers that live code uses (any
helper of a module not named as a test module, which another module may import), and
decorators, except those whose only CUDA calls are ``is_available()`` /
``device_count()``, which are safe to leave on any machine (a class whose every test
is skipped keeps its ``skipUnless(torch.cuda.is_available())`` gate as written).
In a test module (``test_*.py``, ``*_test.py``), a module-level helper that only skipped
code uses never runs either, and is left alone too. ``skipIf``/``skipUnless``/``skipif``
are conditions, never counted here.
"""

from __future__ import annotations

import ast
import os
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
#: pytest's default ``python_files``: test modules, which no other module imports
_TEST_MODULE = re.compile(r"test_.*\.py|.*_test\.py")


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
    if spans and _TEST_MODULE.fullmatch(os.path.basename(ctx.path)):
        spans.extend(_helpers_of_skipped_tests(ctx, spans))
    return spans


def _helpers_of_skipped_tests(ctx: FileContext, spans: list[Span]) -> list[Span]:
    """Module-level helpers of a test module that only skipped code uses (prime-rl's
    ``get_model_pairs``, called only by the tests of a module marked skip): their spans."""
    return [span for function in helper_functions(ctx, spans, _function_spans)
            for span in _function_spans(ctx, function)]


def helper_functions(ctx: FileContext, spans: list[Span], spans_of=None) -> list[cst.FunctionDef]:
    """Module-level helpers (not ``test*``) of which every name in the file that refers to
    them (a call, a fixture parameter, a reference) lies in ``spans``, and there is at least
    one. Repeated until nothing changes, so a helper of such a helper follows (``spans_of``
    gives the lines a found helper then covers; its whole definition by default). pytest
    imports test modules to collect them and no other module imports one, so nothing else
    calls them."""
    definitions: dict[str, cst.FunctionDef] = {}
    for statement in ctx.module.body:
        if isinstance(statement, cst.FunctionDef) and not statement.name.value.startswith("test"):
            definitions[statement.name.value] = statement
    tree = ctx.python_ast()  # the whole file: elision drops statements that use a helper
    if not definitions or tree is None:
        return []
    uses: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg) else None
        if name in definitions:
            uses.setdefault(name, []).append(node.lineno)
    found: list[cst.FunctionDef] = []
    covered = list(spans)
    changed = True
    while changed:
        changed = False
        for name, function in list(definitions.items()):
            lines = uses.get(name)
            if lines and all(any(first <= n <= last for first, last in covered) for n in lines):
                found.append(function)
                covered.extend(spans_of(ctx, function) if spans_of is not None else [whole_span(ctx, function)])
                del definitions[name]
                changed = True
    return found


def whole_span(ctx: FileContext, node: cst.CSTNode) -> Span:
    where = ctx.position(node)
    return where.start.line, where.end.line


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
