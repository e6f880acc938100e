"""NPU805: ``nvidia-smi`` in shell scripts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_PARSED = {"pipeline", "command_substitution", "process_substitution"}
_CONDITION = {"if_statement", "elif_clause", "while_statement"}
SUGGESTION = (
    "on Ascend `npu-smi info` shows the NPUs (table), `npu-smi info -l` lists them with a Total Count, "
    "`npu-smi info -t usages -i <id>` shows one NPU's memory and utilisation; in Python, "
    "torch.npu.device_count() and torch.npu.mem_get_info(); check the output format your script parses"
)


def _decides(parent: Node, child: Node) -> bool:
    """``child``'s exit status decides what runs: an if/while condition, the left of ``&&``/``||``."""
    if parent.type in _CONDITION:
        return parent.child_by_field_name("condition") == child
    return parent.type == "list" and bool(parent.children) and parent.children[0] == child


class ShellNvidiaSmi(ShellRule):
    id = "NPU805"
    name = "shell-nvidia-smi"
    summary = "Rewrite `nvidia-smi` to `npu-smi info` where its output is only shown; report it where the output or exit status is used"
    triggers = (b"nvidia-smi",)
    rationale = """
Launch scripts often print the GPU table before training (`nvidia-smi`, or
`watch -n 1 nvidia-smi`); on Ascend the same table is `npu-smi info`. A bare
`nvidia-smi` whose output is only shown (a statement of its own, the right
side of `&&`, in the background, or redirected into a log file) is rewritten.
Where the script uses what it prints or its exit status (a pipeline, `$(...)`,
an `if`/`while` condition, the left side of `&&`/`||`, output thrown away to
`/dev/null`) or passes options (`--query-gpu=...`, `-L`, `topo -m`), it is
reported instead: `npu-smi` has different options and output, so the parsing
has to be rewritten by hand.
"""
    examples = (
        Example('echo "GPUs:"\nnvidia-smi\n', 'echo "GPUs:"\nnpu-smi info\n'),
        Example("NUM_GPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)  # reported\n"),
        Example('echo "run nvidia-smi to see the GPUs"\n'),
    )

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        if not words:
            return
        first = syntax.program(words[0])
        if first == "watch":
            index = next((i for i, w in enumerate(words[1:], 1) if syntax.program(w) == "nvidia-smi"), None)
            if index is not None and index == len(words) - 1:
                self._rewrite(words[index].node)
            elif index is not None:
                self.report(node, "`nvidia-smi` with options is NVIDIA-only", SUGGESTION)
            return
        if first != "nvidia-smi":
            return
        if len(words) > 1:
            self.report(node, "`nvidia-smi` with options is NVIDIA-only; `npu-smi` has other options and output", SUGGESTION)
        elif self._only_shown(node):
            self._rewrite(words[0].node)
        else:
            self.report(node, "the script uses the output or exit status of `nvidia-smi`, which Ascend machines lack",
                        SUGGESTION)

    def _rewrite(self, word: Node) -> None:
        self.replace_node(word, "npu-smi info", "`nvidia-smi` -> `npu-smi info`")

    @staticmethod
    def _only_shown(command: Node) -> bool:
        child, parent = command, command.parent
        while parent is not None:
            if parent.type in _PARSED:
                return False
            if parent.type == "redirected_statement":
                if b"/dev/null" in parent.text[command.end_byte - parent.start_byte :]:
                    return False
            elif _decides(parent, child):
                return False
            elif parent.type in syntax.CONTAINERS:
                return True
            child, parent = parent, parent.parent
        return True
