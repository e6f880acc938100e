"""The base class of the shell rules (``rules/shell/``).

A shell rule is a visitor of the bash tree: the engine walks each file's tree
once and calls ``visit_<node type>(node)`` on every rule that defines it
(``visit_command``, ``visit_variable_name``...), then ``leave_file()``. Like the
Python rules, shell rules never change the tree; they record

* ``self.replace(start, end, new, message)``: new bytes for a byte range of the
  file (``self.replace_node(node, new, message)`` for a whole node);
* ``self.report(node, message, suggestion)``: a finding.

``triggers`` are byte strings of which a file must contain at least one for
the rule to run (the prefilter: a script without any is not parsed at all).
Documentation attributes (id, name, summary, rationale, examples) are those of
every rule (``npu_migrate/pipeline/rulebase.py``); the examples are shell scripts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from npu_migrate.pipeline.rulebase import Example, FileRule

if TYPE_CHECKING:
    from tree_sitter import Node

    from npu_migrate.shell.engine import ShellFile

__all__ = ["Example", "ShellRule"]


class ShellRule(FileRule):
    front_end: ClassVar[str] = "shell"
    file: ShellFile

    def replace(self, start: int, end: int, new: str, message: str, reason: str | None = None) -> None:
        self.file.replace(start, end, new, self.id, message, reason)

    def replace_node(self, node: Node, new: str, message: str) -> None:
        self.replace(node.start_byte, node.end_byte, new, message)

    def report(self, node: Node, message: str, suggestion: str, offset: int | None = None) -> None:
        """A finding at ``node`` (or at ``offset`` inside it: one word of an option string)."""
        self.file.report(node, self.id, message, suggestion, offset)
