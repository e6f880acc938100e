"""Shared by NPU803 (backend) and NPU804 (device): a value held by a named
option or variable, rewritten where the shell passes it to Python training.

Where a value is found:

* options of a command that launches training (``python``, ``torchrun``,
  ``python -m torch.distributed.launch``, ``deepspeed``, ``accelerate launch``,
  also behind ``srun``/``mpirun``/``nohup``...): ``--name value``,
  ``--name=value``, Hydra overrides ``a.name=value``, yacs pairs ``A.NAME value``;
* the same inside an array or an option string kept in a variable
  (``ARGS=(--backend nccl)``, ``OPTS="--dist-backend nccl --lr 1e-4"``);
* a variable whose name says it holds such a value (``DIST_BACKEND=nccl``,
  ``DEVICE=cuda``), its ``${NAME:-default}``, and any variable passed as the value
  of such an option (``--backend $B`` rewrites ``B=nccl``; ``--backend ${B:-nccl}``
  rewrites the default);
* comparisons with those variables (``[ "$DEVICE" = cuda ]``, ``case $DEVICE in
  cuda)``), so that the script's branches keep working after the rewrite.

Only the literal bytes that change are rewritten (``cuda`` of ``cuda:$RANK``),
whatever quoting is around them. Values behind expansions
(``--device=$DEV_TYPE:0``) are left to the variable's own assignment.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar

from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_COMPARE = {"=", "==", "!="}


def launch_words(node: Node) -> list[syntax.Arg] | None:
    """The arguments of a command that launches training (None for other commands)."""
    launch = syntax.launch_args(node)
    return launch[1] if launch is not None else None


def array_words(node: Node) -> list[syntax.Arg] | None:
    """The elements of an array assigned to a variable (``ARGS=(--backend nccl)``)."""
    if node.parent is not None and node.parent.type == "variable_assignment":
        return [syntax.arg(child) for child in node.named_children]
    return None


def option_string_words(value: Node) -> list[syntax.Arg] | None:
    """The words of a string that holds options (``OPTS="--backend nccl --lr 1"``)."""
    if value.type in ("string", "raw_string"):
        words = syntax.string_args(value)
        if words and words[0].text.startswith("-"):
            return words
    return None


class ValueRule(ShellRule):
    #: Human name of the value, for messages ("backend", "device").
    kind: ClassVar[str]

    @classmethod
    def is_key(cls, name: str) -> bool:
        raise NotImplementedError

    @classmethod
    def new_value(cls, value: str) -> str | None:
        raise NotImplementedError

    @classmethod
    def new_pattern(cls, pattern: str) -> str | None:
        """A ``case`` pattern (``cuda:*``); by default only exact values."""
        return cls.new_value(pattern)

    def __init__(self, file) -> None:
        super().__init__(file)
        self.assignments: dict[str, list[Node]] = {}
        self.flowing: set[str] = set()  # variables passed as the value of a matching option
        self.defaults: dict[str, list[Node]] = {}  # the default words of ``${X:-default}``, per variable
        self.comparisons: list[tuple[str, Node]] = []

    # -- where values are found ------------------------------------------------

    def visit_command(self, node: Node) -> None:
        launched = launch_words(node)
        if launched is not None:
            self._options(launched)
        words = syntax.command_args(node)
        if words and syntax.program(words[0]) in ("test", "[") and len(words) >= 4:
            for left, op, right in zip(words[1:], words[2:], words[3:]):
                if op.text in _COMPARE:
                    self._comparison(left.node, right.node)

    def visit_array(self, node: Node) -> None:
        words = array_words(node)
        if words is not None:
            self._options(words)

    def visit_variable_assignment(self, node: Node) -> None:
        name_node, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        if name_node is None or value is None:
            return
        name = name_node.text.decode("utf-8", "replace")
        self.assignments.setdefault(name, []).append(value)
        words = option_string_words(value)
        if words is not None:
            self._options(words)
            return
        if self.is_key(name):
            self._rewrite(syntax.arg(value), f"`{name}`")

    def visit_expansion(self, node: Node) -> None:
        """``${DIST_BACKEND:-nccl}``: the default of a matching variable; the defaults of
        other variables wait until the end of the file, in case one is passed to a
        matching option (``--dist-backend ${BK:-nccl}``)."""
        found = _default(node)
        if found is None:
            return
        name, default = found
        if self.is_key(name):
            self._rewrite(syntax.arg(default), f"the default of `{name}`")
        else:
            self.defaults.setdefault(name, []).append(default)

    def visit_binary_expression(self, node: Node) -> None:
        operator = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if operator is not None and operator.text.decode() in _COMPARE and left is not None and right is not None:
            self._comparison(left, right)

    def visit_case_statement(self, node: Node) -> None:
        value = node.child_by_field_name("value")
        name = _variable(value) if value is not None else None
        if name is None:
            return
        for item in node.named_children:
            if item.type == "case_item":
                for pattern in item.children_by_field_name("value"):
                    self.comparisons.append((name, pattern))

    # -- decisions -------------------------------------------------------------

    def _options(self, words: list[syntax.Arg]) -> None:
        for name, value in syntax.option_values(words):
            if not self.is_key(name):
                continue
            variable = _passed_variable(value)
            if variable is not None:  # ``--backend $B``, ``--backend=${B:-nccl}``: rewritten where B gets its value
                self.flowing.add(variable)
            else:
                self._rewrite(value, f"`{name}`")

    def _comparison(self, left: Node, right: Node) -> None:
        for variable_side, value_side in ((left, right), (right, left)):
            name = _variable(variable_side)
            if name is not None and syntax.static_value(value_side) is not None:
                self.comparisons.append((name, value_side))

    def leave_file(self) -> None:
        for name in sorted(self.flowing):
            if self.is_key(name):  # matching names were handled where assigned
                continue
            for value in self.assignments.get(name, ()):
                self._rewrite(syntax.arg(value), f"`{name}`")
            for default in self.defaults.get(name, ()):
                self._rewrite(syntax.arg(default), f"the default of `{name}`")
        for name, value in self.comparisons:
            if self.is_key(name) or name in self.flowing:
                word = syntax.arg(value)
                new = self.new_pattern(word.text) if value.type in ("word", "extglob_pattern") else None
                self._rewrite(word, f"the comparison with `{name}`", new)

    def _rewrite(self, value: syntax.Arg, where: str, new: str | None = None) -> None:
        old = value.text
        new = new if new is not None else self.new_value(old)
        if new is None or new == old:
            return
        prefix = len(os.path.commonprefix([old, new]))
        suffix = len(os.path.commonprefix([old[prefix:][::-1], new[prefix:][::-1]]))
        span = value.span(prefix, len(old) - suffix)
        if span is None:
            return  # the change would cross an expansion: left to the variable's assignment
        self.replace(span[0], span[1], new[prefix : len(new) - suffix], f"{self.kind} of {where}: `{old}` -> `{new}`",
                     reason=_reason(self.kind, where))


def _reason(kind: str, where: str) -> str:
    """The evidence, from where the value sits: an option (`--dist-backend`), a variable
    named for one (`DIST_BACKEND`), its default, or a comparison with one."""
    if where.startswith("`-"):
        return f"the value of the option {where}, which takes a {kind}"
    if where.startswith("`"):
        return f"assigned to {where}, a name that holds a {kind} (or that is passed to an option taking one)"
    return f"{where}, which holds a {kind}"


def _unquoted(node: Node) -> Node:
    """The one expansion inside ``"..."``, else the node itself."""
    if node.type == "string" and len(node.named_children) == 1:
        return node.named_children[0]
    return node


def _default(node: Node) -> tuple[str, Node] | None:
    """``("X", <default>)`` for ``${X:-default}`` (also ``-``, ``:=``, ``=``)."""
    children = node.named_children
    if node.type != "expansion" or len(children) < 2 or children[0].type != "variable_name":
        return None
    operator = node.child(2)
    if operator is None or operator.type not in (":-", "-", ":=", "="):
        return None
    return children[0].text.decode("utf-8", "replace"), children[1]


def _passed_variable(value: syntax.Arg) -> str | None:
    """``X`` when the whole value is one expansion of it: ``$X``, ``"${X}"``, ``${X:-default}``
    (also after ``--name=``)."""
    if len(value.pieces) != 1 or value.pieces[0].start is not None:
        return None
    text = value.pieces[0].text
    stack = [value.node]
    while stack:
        node = stack.pop()
        if node.type in ("simple_expansion", "expansion") and node.text == text:
            found = _default(node)
            return found[0] if found is not None else _variable(node)
        stack.extend(node.children)
    return None


def _variable(node: Node) -> str | None:
    """``X`` for ``$X``, ``${X}``, ``"$X"``, ``"${X}"``."""
    node = _unquoted(node)
    if node.type in ("simple_expansion", "expansion") and len(node.named_children) == 1:
        child = node.named_children[0]
        if child.type == "variable_name":
            return child.text.decode("utf-8", "replace")
    return None
