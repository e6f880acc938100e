"""Shared by NPU860 and NPU861: the requirement lists of a ``setup()`` call."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from npu_migrate.python.cst_util import string_value, with_string_value
from npu_migrate.python.rule import Rule

_SETUP = {"setuptools.setup", "distutils.core.setup", "setup"}
_KEYWORDS = ("install_requires", "extras_require", "tests_require")


@dataclass
class RequirementList:
    where: str
    node: cst.List | cst.Tuple
    #: ``(element, requirement text)`` of every string element.
    items: list[tuple[cst.Element, str]] = field(default_factory=list)


class SetupRequirementsRule(Rule):
    """Collects the literal requirement lists of ``setup()``; ``check(lists)`` decides."""

    triggers = ("install_requires", "extras_require")
    whole_file = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.lists: list[RequirementList] = []
        self.seen: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = self.qualified_name(node.func) or (node.func.value if isinstance(node.func, cst.Name) else None)
        if name not in _SETUP:
            return
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in _KEYWORDS:
                continue
            value = self._resolve(arg.value)
            if isinstance(value, (cst.List, cst.Tuple)):
                self._add(arg.keyword.value, value)
            elif isinstance(value, cst.Dict):
                for element in value.elements:
                    extra = string_value(element.key) if isinstance(element, cst.DictElement) else None
                    target = self._resolve(element.value)
                    if extra is not None and isinstance(target, (cst.List, cst.Tuple)):
                        self._add(f"extras_require[{extra!r}]", target)

    def _resolve(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """A name bound once at module level to a literal stands for that literal."""
        if not isinstance(node, cst.Name):
            return node
        found = []
        for statement in self.ctx.module.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and any(
                        isinstance(t.target, cst.Name) and t.target.value == node.value for t in small.targets
                    ):
                        found.append(small.value)
        return found[0] if len(found) == 1 else node

    def _add(self, where: str, node: cst.List | cst.Tuple) -> None:
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        listed = RequirementList(where, node)
        for element in node.elements:
            text = string_value(element.value)
            if text is not None:
                listed.items.append((element, text))
        self.lists.append(listed)

    def leave_file(self) -> None:
        self.check(self.lists)

    def check(self, lists: list[RequirementList]) -> None:
        raise NotImplementedError


def _uncommented(comma: cst.Comma) -> cst.Comma:
    """``comma`` without the comment after it (that comment belongs to its element)."""
    space = comma.whitespace_after
    if isinstance(space, cst.ParenthesizedWhitespace):
        return comma.with_changes(whitespace_after=space.with_changes(first_line=cst.TrailingWhitespace()))
    return comma


def _item_indent(updated: cst.List | cst.Tuple, between: cst.Comma | None) -> str | None:
    """The indentation of the list's elements when they sit on lines of their own."""
    for space in (between.whitespace_after if between is not None else None, updated.lbracket.whitespace_after):
        if isinstance(space, cst.ParenthesizedWhitespace):
            return space.last_line.value
    return None


def appender(requirement: str):
    """Append ``requirement`` to the (updated) list in its layout: the separator between
    its elements, the quotes of its last string, its trailing comma if it has one; a
    comment after the last element stays on that element's line."""

    def append(updated: cst.List | cst.Tuple) -> cst.List | cst.Tuple:
        elements = list(updated.elements)
        last = elements[-1]
        between = next((e.comma for e in reversed(elements[:-1]) if isinstance(e.comma, cst.Comma)), None)
        string = last.value if isinstance(last.value, cst.SimpleString) else cst.SimpleString(f'"{requirement}"')
        closing = updated.rbracket.whitespace_before
        indent = _item_indent(updated, between)
        if isinstance(closing, cst.ParenthesizedWhitespace) and indent is not None:
            # one element per line, the bracket on its own line: the last element keeps
            # its comment, the new one goes on the next line, with its trailing comma if any
            separator = cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
                first_line=closing.first_line, indent=True, last_line=cst.SimpleWhitespace(indent)))
            elements[-1] = last.with_changes(comma=separator)
            trailing = cst.Comma() if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
            elements.append(cst.Element(with_string_value(string, requirement), comma=trailing))
            bracket = updated.rbracket.with_changes(whitespace_before=closing.with_changes(
                first_line=cst.TrailingWhitespace()))
            return updated.with_changes(elements=elements, rbracket=bracket)
        separator = _uncommented(between) if between is not None else cst.Comma(
            whitespace_after=cst.SimpleWhitespace(" "))
        trailing = last.comma
        elements[-1] = last.with_changes(comma=separator)
        elements.append(cst.Element(with_string_value(string, requirement), comma=trailing))
        return updated.with_changes(elements=elements)

    return append
