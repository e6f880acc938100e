"""What rules record during the batched pass (edits, findings, import requests),
kept in :class:`~npu_migrate.python.context.FileContext` and applied or reported
by the engine afterwards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

#: A replacement node, or a function of the updated node (so that edits other rules
#: make inside it are kept).
Replacement = cst.CSTNode | Callable[[cst.CSTNode], cst.CSTNode]


@dataclass
class Edit:
    rule: str
    node: cst.CSTNode
    anchor: cst.CSTNode
    message: str
    needs_torch_npu: bool
    replacement: Replacement | None = None
    before: tuple[cst.BaseStatement, ...] = ()
    after: tuple[cst.BaseStatement, ...] = ()
    #: inserted ahead of other rules' statements at the same place (npu_runtime.install())
    first: bool = False
    #: nodes that other rules' replacements must still rewrite when this edit is applied
    #: (an import is removed because every use of it is rewritten elsewhere): if one of
    #: those edits is dropped (suppressed, in NPU-aware code...), this one is dropped too
    requires: tuple[cst.CSTNode, ...] = ()
    #: why the rule made this edit (the evidence), shown in the report
    reason: str | None = None


@dataclass
class FindingRecord:
    rule: str
    node: cst.CSTNode
    message: str
    suggestion: str


@dataclass
class ImportRequest:
    rule: str
    module: str
    obj: str | None
    asname: str | None
