"""Finds every rule class under ``npu_migrate.rules`` (the repository's ``rules/``)."""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from npu_migrate.python.rule import Rule


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


@functools.cache
def all_rules() -> dict[str, type[Rule]]:
    """Rule id -> rule class, sorted by id."""
    import npu_migrate.rules as package
    from npu_migrate.python.rule import Rule

    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
    rules: dict[str, type[Rule]] = {}
    for cls in _subclasses(Rule):
        rule_id = cls.__dict__.get("id")
        if not rule_id:
            continue  # a shared base class, not a rule
        if rule_id in rules and rules[rule_id] is not cls:
            raise RuntimeError(f"duplicate rule id {rule_id}: {rules[rule_id].__module__} and {cls.__module__}")
        rules[rule_id] = cls
    return dict(sorted(rules.items()))


_RULE_MODULE = re.compile(r"npu(\d{3})_\w+\.py")


@functools.cache
def rule_ids() -> list[str]:
    """Rule ids from the rule modules' file names (``npu201_nccl_backend.py`` is
    NPU201), without importing the rules or libcst: enough to check ``--select``
    and ``--ignore`` on a run that the cache answers. A test checks it against
    :func:`all_rules`."""
    import npu_migrate.rules as package

    found = set()
    for root in package.__path__:
        for _, _, files in os.walk(root):
            found.update(f"NPU{m.group(1)}" for m in map(_RULE_MODULE.fullmatch, files) if m)
    return sorted(found)
