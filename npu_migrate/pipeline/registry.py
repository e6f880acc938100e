"""Finds every rule under ``npu_migrate.rules`` (the repository's ``rules/``).

Rules are grouped in family packages (``rules/device/``, ``rules/shell/``...).
A family package names the front end its rules belong to with a module-level
``FRONT_END = "shell"`` (default ``"python"``), so :func:`rules_for` imports only
the families a front end needs: migrating Python files never imports the shell
rules, and the reverse. A family about one subject that spans front ends
(``rules/llm/``) says ``FRONT_END = None`` and holds one sub-package per front
end (``rules/llm/shell/``), each with its own ``FRONT_END``.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re

from npu_migrate.pipeline.rulebase import RuleBase


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


@functools.cache
def _families() -> dict[str, str]:
    """Family package name -> the front end its rules belong to."""
    import npu_migrate.rules as package

    families = {}
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if not info.ispkg:
            continue
        module = importlib.import_module(info.name)
        owner = getattr(module, "FRONT_END", "python")
        if owner is not None:
            families[info.name] = owner
            continue
        for sub in pkgutil.iter_modules(module.__path__, info.name + "."):  # one sub-package per front end
            if sub.ispkg:
                families[sub.name] = getattr(importlib.import_module(sub.name), "FRONT_END", "python")
    return families


@functools.cache
def rules_for(front_end: str) -> dict[str, type[RuleBase]]:
    """Rule id -> rule class for the rules ``front_end`` runs, sorted by id."""
    for family, owner in _families().items():
        if owner == front_end:
            for info in pkgutil.walk_packages(importlib.import_module(family).__path__, family + "."):
                importlib.import_module(info.name)
    rules: dict[str, type[RuleBase]] = {}
    for cls in _subclasses(RuleBase):
        rule_id = cls.__dict__.get("id")
        if not rule_id or cls.front_end != front_end:
            continue  # a shared base class, or another front end's rule
        if rule_id in rules and rules[rule_id] is not cls:
            raise RuntimeError(f"duplicate rule id {rule_id}: {rules[rule_id].__module__} and {cls.__module__}")
        rules[rule_id] = cls
    return dict(sorted(rules.items()))


@functools.cache
def all_rules() -> dict[str, type[RuleBase]]:
    """Every rule of every front end: rule id -> rule class, sorted by id."""
    rules: dict[str, type[RuleBase]] = {}
    for front_end in sorted(set(_families().values())):
        for rule_id, cls in rules_for(front_end).items():
            if rule_id in rules:
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


def impact_of(rule_id: str, notes: dict[str, tuple[str, str]] | None = None) -> str:
    """A rule's impact class (:attr:`RuleBase.impact`); ``review`` for an id no rule has.
    ``notes``: a result's :attr:`~npu_migrate.pipeline.model.FileResult.rule_notes`, which
    spare importing the rules."""
    if notes and rule_id in notes:
        return notes[rule_id][1]
    rule = all_rules().get(rule_id)
    return rule.impact if rule is not None else "review"
