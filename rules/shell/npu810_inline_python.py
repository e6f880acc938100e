"""NPU810: Python code written inside a shell script (``python -c``, heredocs)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

#: Text without which inline code cannot hold anything the Python rules migrate.
_CUDA_WORDS = (b"cuda", b"nccl", b"CUDA", b"NCCL", b"Cuda")


class ShellInlinePython(ShellRule):
    id = "NPU810"
    name = "shell-inline-python"
    summary = "Report Python code inside a shell script (`python -c`, `python - <<EOF`) that the Python rules would migrate"
    triggers = (b"python",)
    fixable = False
    rationale = """
Launch scripts run short Python programs inline: `python -c 'import torch;
print(torch.cuda.device_count())'` to count devices, `python - <<EOF ... EOF`
to prepare a checkpoint. Such code is Python, but it lives in a shell string or
heredoc, where shell expansions (`$VAR`, backquotes) may be part of the code
and a rewrite could change what the shell passes. So it is not rewritten: the
Python rules are run on the code as written, and when they would change or
report anything the command is reported with what they found, for a reviewer
to carry over by hand or to move into a `.py` file that `npu-migrate` then
migrates like any other. Code with no CUDA-ism is never reported.
"""
    examples = (
        Example("python -c 'import torch; print(torch.cuda.device_count())'  # reported\n"),
        Example("python - <<EOF  # reported\nimport torch\nx = torch.zeros(1).cuda()\nEOF\n"),
        Example("python -c 'import torch; print(torch.__version__)'\n"),
    )

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        if not words or syntax.program(words[0]) != "python":
            return
        for index, word in enumerate(words[1:-1], 1):
            if word.text == "-c":
                self._check(node, words[index + 1].node.text, words[index + 1].node)
                return
            if not word.text.startswith("-"):
                return  # a script: python's own options are over

    def visit_heredoc_redirect(self, node: Node) -> None:
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if body is None or not self._feeds_python(node):
            return
        self._check(node.parent or node, body.text, body)

    @staticmethod
    def _feeds_python(redirect: Node) -> bool:
        """``python - <<EOF``, ``python <<EOF`` or ``cat <<EOF | python``."""
        commands = [c for c in redirect.children if c.type == "pipeline"]
        commands = [cmd for p in commands for cmd in p.children if cmd.type == "command"]
        statement = redirect.parent
        if statement is not None:
            commands += [c for c in statement.children if c.type == "command"]
        for command in commands:
            words = syntax.command_args(command)
            if words and syntax.program(words[0]) == "python":
                rest = [w.text for w in words[1:] if w.text != "-u"]
                if not rest or rest[0] == "-":
                    return True
        return False

    def _check(self, node: Node, code: bytes, where: Node) -> None:
        if not any(word in code for word in _CUDA_WORDS):
            return
        if where.type == "raw_string" or where.type == "string":
            code = code[1:-1]
        from npu_migrate.python.engine import migrate_source

        result = migrate_source("<inline>.py", code)
        rules = Counter(f.rule for f in result.fixes) + Counter(f.rule for f in result.findings)
        if result.error is not None or not rules:
            return
        found = ", ".join(f"{rule} x{count}" for rule, count in sorted(rules.items()))
        self.report(
            node,
            f"Python code inside the shell script is not migrated; the Python rules find {found} in it",
            "move the code into a .py file (npu-migrate then migrates it) or carry the changes over by hand; "
            "`npu-migrate -` with --stdin-filename x.py on the code shows them",
        )
