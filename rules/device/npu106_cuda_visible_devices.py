"""NPU106: ``CUDA_VISIBLE_DEVICES`` -> ``ASCEND_RT_VISIBLE_DEVICES`` where it is an environment key."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import last_name, string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.tables.env_vars import SAME_MEANING

OLD = "CUDA_VISIBLE_DEVICES"
NEW = SAME_MEANING[OLD]

#: functions and methods whose first argument is an environment variable name
_ENV_FUNCTIONS = {"getenv", "putenv", "unsetenv", "setenv", "delenv", "get", "pop", "setdefault", "__contains__"}
_PROSE_CALLS = {"print", "info", "debug", "warning", "warn", "error", "exception", "critical", "log", "write"}


class CudaVisibleDevices(Rule):
    id = "NPU106"
    name = "cuda-visible-devices"
    summary = "Rewrite the `CUDA_VISIBLE_DEVICES` environment key to `ASCEND_RT_VISIBLE_DEVICES`"
    triggers = (OLD,)
    rationale = """
On Ascend the runtime reads `ASCEND_RT_VISIBLE_DEVICES` (same format: a
comma-separated list of device numbers, renumbered from 0 in the process;
torch_npu parses it in `npu/__init__.py::_parse_visible_devices`).
`CUDA_VISIBLE_DEVICES` is ignored, so setting it no longer hides devices and
reading it returns None. torch_npu's `transfer_to_npu` does not map it.

The key is rewritten where it is used as one: `os.environ[...]` (read,
assignment, `del`), `os.environ.get/pop/setdefault`, `os.getenv`, `os.putenv`,
`monkeypatch.setenv`, `"CUDA_VISIBLE_DEVICES" in os.environ`, keys of dict
displays (`env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"}`) and keyword
arguments (`dict(os.environ, CUDA_VISIBLE_DEVICES="0")`, `env.update(...)`).
The same string in a subscript of any mapping (`env["CUDA_VISIBLE_DEVICES"]`
on a copy of the environment) counts too.

Not rewritten, but reported: the name inside a longer string (a shell command
such as `f"CUDA_VISIBLE_DEVICES={gpu} python train.py"`), or the bare string in
a place this rule cannot identify. Messages (print, logging, exceptions) and
docstrings are left alone. Launcher scripts (`.sh`) are outside this tool.
The edit does not need `import torch_npu`.
"""
    examples = (
        Example(
            'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = args.gpus\n',
            'import os\nos.environ["ASCEND_RT_VISIBLE_DEVICES"] = args.gpus\n',
        ),
        Example(
            "import os\nenv = dict(os.environ, CUDA_VISIBLE_DEVICES=str(rank))\n",
            "import os\nenv = dict(os.environ, ASCEND_RT_VISIBLE_DEVICES=str(rank))\n",
        ),
        Example("print('set CUDA_VISIBLE_DEVICES to choose GPUs')\n"),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is None or OLD not in value:
            return
        verdict = self._classify(node) if value == OLD else self._classify_text(node)
        if verdict == "rewrite":
            self.replace(node, _swap, f"`{OLD}` -> `{NEW}`", needs_torch_npu=False)
        elif verdict == "report":
            self._report(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        text = "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
        if OLD in text and self._classify_text(node) == "report":
            self._report(node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == OLD:
            self.replace(
                node.keyword, cst.Name(NEW), f"`{OLD}=` -> `{NEW}=`", needs_torch_npu=False
            )

    def _report(self, node: cst.CSTNode) -> None:
        self.report(
            node,
            f"`{OLD}` in a command or a place that could not be identified as an environment key; left unchanged",
            f"on Ascend the variable is `{NEW}` (same format): use that name",
        )

    def _classify(self, node: cst.CSTNode) -> str:
        """'rewrite', 'report' or 'prose' for the exact string."""
        ctx = self.ctx
        parent = ctx.parent(node)
        if isinstance(parent, cst.ConcatenatedString):
            return "report"
        if isinstance(parent, cst.Index):  # x["CUDA_VISIBLE_DEVICES"]
            return "rewrite"
        if isinstance(parent, cst.DictElement) and parent.key is node:
            return "rewrite"
        if isinstance(parent, cst.ComparisonTarget) or isinstance(parent, cst.Comparison):
            comparison = parent if isinstance(parent, cst.Comparison) else ctx.parent(parent)
            if isinstance(comparison, cst.Comparison) and comparison.left is node and all(
                isinstance(t.operator, (cst.In, cst.NotIn)) for t in comparison.comparisons
            ):
                return "rewrite"
            return "report"
        if isinstance(parent, cst.Arg):
            verdict = self._call_verdict(parent)
            if verdict is not None:
                return verdict
            call = ctx.parent(parent)
            position = [a for a in call.args if a.keyword is None].index(parent) if parent.keyword is None else None
            callee = last_name(call.func)
            if position == 0 and callee in _ENV_FUNCTIONS:
                return "rewrite"
            return "report"
        if isinstance(parent, cst.Expr):
            return "prose"
        return "report"

    def _classify_text(self, node: cst.CSTNode) -> str:
        """A longer string mentioning the variable: a shell command (report) or a message."""
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.Expr):
            return "prose"
        if isinstance(parent, cst.Arg):
            verdict = self._call_verdict(parent)
            if verdict is not None:
                return verdict
        return "report"

    def _call_verdict(self, arg: cst.Arg) -> str | None:
        call = self.ctx.parent(arg)
        if not isinstance(call, cst.Call):
            return "report"
        callee = last_name(call.func) or ""
        if callee in _PROSE_CALLS or callee.endswith(("Error", "Exception", "Warning")):
            return "prose"
        if arg.keyword is not None and arg.keyword.value in ("help", "msg", "message", "description"):
            return "prose"
        return None


def _swap(node: cst.SimpleString) -> cst.SimpleString:
    return node.with_changes(value=node.value.replace(OLD, NEW, 1))
