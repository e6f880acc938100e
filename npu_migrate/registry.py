"""Finds every rule class under ``npu_migrate.rules`` (the repository's ``rules/``)."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from npu_migrate.rule import Rule


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
