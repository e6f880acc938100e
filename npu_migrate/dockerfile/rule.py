"""The base class of the Dockerfile rules (``rules/dockerfile/``).

A Dockerfile rule is a visitor of the Dockerfile tree: ``visit_from_instruction``,
``visit_arg_instruction``... are called once per instruction (node types of
tree-sitter-dockerfile), then ``leave_file()``. Rules record findings and edits
as the shell rules do (``npu_migrate/shell/rule.py``). ``RUN``/``ENV`` lines are
not theirs: the shell rules see those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from npu_migrate.pipeline.rulebase import Example, FileRule

if TYPE_CHECKING:
    from tree_sitter import Node

    from npu_migrate.dockerfile.engine import DockerfileFile

__all__ = ["DockerfileRule", "Example"]


class DockerfileRule(FileRule):
    front_end: ClassVar[str] = "dockerfile"
    file: DockerfileFile

    def replace(self, start: int, end: int, new: str, message: str) -> None:
        self.file.recorder.replace(start, end, new, self.id, message)

    def report(self, node: Node, message: str, suggestion: str) -> None:
        self.file.recorder.report(node.start_byte, self.id, message, suggestion, self.file.instruction_start(node))
