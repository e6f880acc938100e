"""One walk of a tree-sitter tree that calls every rule's ``visit_<node type>``
(the shell and Dockerfile front ends; rules are visitors as in the Python front
end, where libcst plays this part)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Tree


def handlers(visitors: Iterable[object]) -> dict[str, list[Callable[[Node], None]]]:
    """Node type -> the bound ``visit_<type>`` methods of ``visitors``."""
    found: dict[str, list[Callable[[Node], None]]] = {}
    for visitor in visitors:
        for name in dir(type(visitor)):
            if name.startswith("visit_"):
                found.setdefault(name[len("visit_") :], []).append(getattr(visitor, name))
    return found


def walk(tree: Tree, table: dict[str, list[Callable[[Node], None]]], every: Callable[[Node], None] | None = None) -> None:
    """Visit every node in document order (pre-order)."""
    cursor = tree.walk()
    while True:
        node = cursor.node
        for handler in table.get(node.type, ()):
            handler(node)
        if every is not None:
            every(node)
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return
