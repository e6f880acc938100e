"""Shared by NPU860 and NPU861: the requirement lists of a ``setup()`` call."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from npu_migrate.python.cst_util import string_value
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
