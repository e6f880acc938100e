"""The base class every Python rule derives from (see also ``npu_migrate/pipeline/rulebase.py``).

A rule is a libcst :class:`~libcst.BatchableCSTVisitor`: all selected rules walk
the *same* parsed tree in one batched pass, and share one :class:`FileContext`
(qualified names, parents, scopes, positions resolved once per file).

Rules never mutate the tree. They record what they want through the helpers
below; the engine applies every recorded edit in one transform afterwards, drops
those suppressed by ``# npu-migrate: ignore`` comments or per-file ignores, and
reports the rest with their original line and column.

Each rule lives in its own module under ``rules/<family>/`` and carries its own
documentation, in the style of Fixit and ruff:

* ``id`` (stable, ``NPU101``), ``name`` (kebab-case) and a one-line ``summary``;
* ``rationale``: why, and what an Ascend engineer needs to know (markdown);
* ``examples``: :class:`Example` pairs. ``after=None`` means the code must stay
  byte-identical (a VALID example). The test suite runs every example.
* ``triggers``: words the prefilter looks for. A file that contains none of the
  trigger words of any selected rule is not parsed at all. A tuple entry means
  "all of these words".
* ``local_triggers`` / ``whole_file``: what must appear inside a function or
  class for the rule to act there (see :meth:`Rule.local_words` and
  ``npu_migrate/python/elision.py``); definitions without any are not parsed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

import libcst as cst

from npu_migrate.pipeline.rulebase import Example, RuleBase, rule_doc
from npu_migrate.python.context import FileContext
from npu_migrate.python.records import Replacement
from npu_migrate.python.visitors import CachedVisitorLookup

__all__ = ["Example", "Rule", "rule_doc"]


class Rule(RuleBase, CachedVisitorLookup, cst.BatchableCSTVisitor):
    """A Python rule (the documentation attributes come from :class:`RuleBase`)."""

    front_end: ClassVar[str] = "python"
    triggers: ClassVar[Sequence[str | tuple[str, ...]]] = ()
    #: The rule's edits are dropped unless some other rule's edit survives in the
    #: same file (e.g. injecting the runtime shim into files the tool migrated).
    only_with_other_fixes: ClassVar[bool] = False
    #: Besides on its own triggers, the prefilter runs the rule whenever another rule
    #: is needed (it acts on what the others change).
    runs_with_other_rules: ClassVar[bool] = False
    #: The rule's edits and findings are kept only in files about a device: files
    #: that name CUDA or the NPU (the words ``cuda``, ``npu``, ``is_npu``,
    #: ``torch_npu``), or that another rule's surviving edit makes use the NPU. A
    #: rewrite turns the first kind into the second, so a second run over migrated
    #: code reports what the first one did. Such a rule also sets
    #: ``runs_with_other_rules``.
    only_in_device_files: ClassVar[bool] = False
    #: Words (trigger syntax) or compiled regexes, one of which appears inside any
    #: function or class the rule acts on, or whose contents it reads. Empty: derived
    #: from ``triggers`` (see :meth:`local_words`).
    local_triggers: ClassVar[Sequence[str | re.Pattern[str]]] = ()
    #: Qualified names (or prefixes) the rule acts on, such as ``torch.load``: a
    #: definition is parsed if it spells one, in full or through the file's imports
    #: (``th.load`` after ``import torch as th``). Replaces the trigger words as local
    #: triggers where a word alone (``load``, ``compile``) is everywhere.
    local_names: ClassVar[Sequence[str]] = ()
    #: The rule's decisions need every function of the file: files it may act on are
    #: parsed whole.
    whole_file: ClassVar[bool] = False

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx

    @classmethod
    def local_words(cls) -> tuple[str | re.Pattern[str], ...] | None:
        """What decides whether a function or class must be parsed for this rule
        (None: the whole file). By default the trigger words; for a tuple trigger
        such as ``("torch", "load")`` only its last word, which is the one written
        where the rule acts (the others need only be somewhere in the file, usually
        in its imports)."""
        if cls.whole_file:
            return None
        if cls.local_triggers or cls.local_names:
            return tuple(cls.local_triggers)
        return tuple(t if isinstance(t, str) else t[-1] for t in cls.triggers)

    # -- helpers for rule authors -------------------------------------------------

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        return self.ctx.qualified_name(node)

    def replace(
        self,
        node: cst.CSTNode,
        new: Replacement,
        message: str,
        *,
        needs_torch_npu: bool = True,
        anchor: cst.CSTNode | None = None,
        requires: tuple[cst.CSTNode, ...] = (),
        reason: str | None = None,
    ) -> None:
        """Replace ``node``. ``new`` may be a node, or a function of the updated node
        (so that edits other rules make inside ``node`` are kept). ``requires``: nodes
        that other rules replace, without which this edit must not be applied.
        ``reason``: the evidence for the edit (``passed to `torch.device` as its
        device``), shown by ``--show-fixes``, the JSON/SARIF reports and ``explain``;
        without one the report gives the rule's summary."""
        self.ctx.record_replace(self.id, node, new, message, needs_torch_npu, anchor or node, requires, reason)

    def insert_before(
        self,
        statement: cst.CSTNode,
        new: Sequence[cst.BaseStatement],
        message: str,
        *,
        needs_torch_npu: bool = False,
        anchor: cst.CSTNode | None = None,
        first: bool = False,
    ) -> None:
        """Statements inserted at one place go in rule-id order, those with ``first``
        (set-up that must run before the others' code) ahead of them."""
        self.ctx.record_insert(self.id, statement, tuple(new), (), message, needs_torch_npu, anchor or statement, first)

    def insert_after(
        self,
        statement: cst.CSTNode,
        new: Sequence[cst.BaseStatement],
        message: str,
        *,
        needs_torch_npu: bool = False,
        anchor: cst.CSTNode | None = None,
        first: bool = False,
    ) -> None:
        """Statements inserted at one place go in rule-id order, those with ``first``
        (set-up that must run before the others' code) ahead of them."""
        self.ctx.record_insert(self.id, statement, (), tuple(new), message, needs_torch_npu, anchor or statement, first)

    def add_import(self, module: str, obj: str | None = None, asname: str | None = None) -> None:
        """Add ``import module`` / ``from module import obj`` if the file ends up changed
        by this rule (through libcst's AddImportsVisitor)."""
        self.ctx.record_import(self.id, module, obj, asname)

    def report(self, node: cst.CSTNode, message: str, suggestion: str) -> None:
        self.ctx.record_finding(self.id, node, message, suggestion)

    def leave_file(self) -> None:
        """Called once after the batched pass, before edits are applied."""
