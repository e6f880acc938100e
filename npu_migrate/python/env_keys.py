"""How a string naming an environment variable is used: as the key of the environment
(``os.environ["X"]``, ``os.getenv("X")``, ``"X" in os.environ``, ``{"X": ...}``), inside a
message (a print, a log call, an exception, a docstring), or some other way the rules
cannot prove (a concatenation, a shell command, an argument of an unknown function).

Rules that rename variables rewrite only on ``"rewrite"``, report on ``"report"`` and stay
silent on ``"prose"``.
"""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import last_name

#: functions and methods whose first argument is an environment variable name
_ENV_FUNCTIONS = {"getenv", "putenv", "unsetenv", "setenv", "delenv", "get", "pop", "setdefault", "__contains__"}
#: calls whose string arguments are messages for a person
_PROSE_CALLS = {"print", "info", "debug", "warning", "warn", "error", "exception", "critical", "log", "write"}


def string_use(ctx, node: cst.CSTNode) -> str:
    """'rewrite', 'report' or 'prose' for a string that is exactly the variable's name."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.ConcatenatedString):
        return "report"
    if isinstance(parent, cst.Index):  # x["CUDA_VISIBLE_DEVICES"]
        return "rewrite"
    if isinstance(parent, cst.DictElement) and parent.key is node:
        return "rewrite"
    if isinstance(parent, (cst.ComparisonTarget, cst.Comparison)):
        comparison = parent if isinstance(parent, cst.Comparison) else ctx.parent(parent)
        if isinstance(comparison, cst.Comparison) and comparison.left is node and all(
            isinstance(t.operator, (cst.In, cst.NotIn)) for t in comparison.comparisons
        ):
            return "rewrite"
        return "report"
    if isinstance(parent, cst.Arg):
        verdict = _call_verdict(ctx, parent)
        if verdict is not None:
            return verdict
        call = ctx.parent(parent)
        position = [a for a in call.args if a.keyword is None].index(parent) if parent.keyword is None else None
        if position == 0 and last_name(call.func) in _ENV_FUNCTIONS:
            return "rewrite"
        return "report"
    if isinstance(parent, cst.Expr):
        return "prose"
    return "report"


def text_use(ctx, node: cst.CSTNode) -> str:
    """'report' or 'prose' for a longer string mentioning the variable: a shell command
    or an argument the rules cannot follow (report), or a message (prose)."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Expr):
        return "prose"
    if isinstance(parent, cst.Arg):
        verdict = _call_verdict(ctx, parent)
        if verdict is not None:
            return verdict
    return "report"


def _call_verdict(ctx, arg: cst.Arg) -> str | None:
    call = ctx.parent(arg)
    if not isinstance(call, cst.Call):
        return "report"
    callee = last_name(call.func) or ""
    if callee in _PROSE_CALLS or callee.endswith(("Error", "Exception", "Warning")):
        return "prose"
    if arg.keyword is not None and arg.keyword.value in ("help", "msg", "message", "description"):
        return "prose"
    return None
