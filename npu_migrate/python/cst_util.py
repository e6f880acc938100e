"""Small libcst helpers that several rule families share."""

from __future__ import annotations

import libcst as cst


def from_import_names(node: cst.ImportFrom) -> list[tuple[cst.ImportAlias, str, str]]:
    """``(alias, qualified name, local name)`` for each name of an absolute
    ``from a.b import c as d`` (here ``("a.b.c", "d")``); empty for relative and star imports."""
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
        return []
    module = cst.helpers.get_full_name_for_node(node.module)
    out = []
    for alias in node.names:
        name = cst.helpers.get_full_name_for_node(alias.name)
        local = cst.helpers.get_full_name_for_node(alias.asname.name) if alias.asname is not None else name
        out.append((alias, f"{module}.{name}", local))
    return out


def last_name(node: cst.CSTNode) -> str | None:
    """``b`` for ``a.b``, ``a`` for ``a`` (a callee's or an index's own name), else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def call_arg(call: cst.Call, keyword: str | None = None, position: int | None = None) -> cst.Arg | None:
    """The argument passed as ``keyword=`` or at ``position`` (0-based), if any."""
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg
    if position is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if any(a.star == "*" for a in call.args):
            # *args before the position make the index unknowable (``**kwargs`` does not)
            first_star = next(i for i, a in enumerate(call.args) if a.star == "*")
            if sum(1 for a in call.args[:first_star] if a.keyword is None) <= position:
                return None
        if position < len(positional):
            return positional[position]
    return None


def string_value(node: cst.CSTNode | None) -> str | None:
    """The value of a plain (non-f, non-bytes) string literal, else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes: not a string we can reason about
            return None
        return value if isinstance(value, str) else None
    return None


def string_literal(value: str, quote: str = '"') -> cst.SimpleString:
    """A new plain string literal (``value`` must not need escaping); pass the
    file's quote (``ctx.quote``) so new strings match the ones around them."""
    return cst.SimpleString(f"{quote}{value}{quote}")


def with_string_value(node: cst.SimpleString, value: str) -> cst.SimpleString:
    """Same prefix and quotes, new contents (``value`` must not need escaping)."""
    return node.with_changes(value=f"{node.prefix}{node.quote}{value}{node.quote}")


def replace_string(node: cst.CSTNode, old: str, new: str) -> cst.CSTNode:
    """Replace ``old`` by ``new`` inside every string part of ``node`` (plain or f-string
    literal text), keeping prefixes and quotes."""

    class _Replace(cst.CSTTransformer):
        def leave_SimpleString(self, original, updated):
            return updated.with_changes(value=updated.value.replace(old, new))

        def leave_FormattedStringText(self, original, updated):
            return updated.with_changes(value=updated.value.replace(old, new))

    return node.visit(_Replace())


def rename_attribute(node: cst.CSTNode, old: str, new: str) -> cst.CSTNode:
    """In a dotted chain ``a.old.b``, rename the first segment equal to ``old``."""
    names: list[cst.Attribute] = []
    current = node
    while isinstance(current, cst.Attribute):
        names.append(current)
        current = current.value
    if isinstance(current, cst.Name) and current.value == old:
        return _rebuild(node, current, current.with_changes(value=new))
    for attribute in reversed(names):
        if attribute.attr.value == old:
            return _rebuild(node, attribute, attribute.with_changes(attr=attribute.attr.with_changes(value=new)))
    return node


def _rebuild(root: cst.CSTNode, target: cst.CSTNode, replacement: cst.CSTNode) -> cst.CSTNode:
    if root is target:
        return replacement
    assert isinstance(root, cst.Attribute)
    return root.with_changes(value=_rebuild(root.value, target, replacement))


def is_docstring(statement: cst.CSTNode) -> bool:
    """A statement that is only a string literal (a docstring where it comes first)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def is_main_guard(node: cst.CSTNode) -> bool:
    """``if __name__ == "__main__":`` (either operand order, any quotes)."""
    if not isinstance(node, cst.If) or not isinstance(node.test, cst.Comparison):
        return False
    test = node.test
    if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if string_value(s) == "__main__"]
    return len(names) == 1 and len(strings) == 1


def find_all(tree: cst.CSTNode, kind: type[cst.CSTNode]) -> list:
    """Every node of type ``kind`` in ``tree``, in source order (libcst's matchers do
    this too, but importing them costs the engine's start-up ~0.13 s)."""
    found: list = []

    class _Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind):
                found.append(node)
            return True

    tree.visit(_Collect())
    return found
