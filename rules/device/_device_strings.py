"""Shared by NPU104 and NPU108: the literals that look like a CUDA device, collected
during the pass and decided in ``leave_file`` by the shared "reaches torch" analysis
(:mod:`npu_migrate.python.reaches_torch`)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.reaches_torch import (  # noqa: F401 - the names the device rules use
    DEVICE_VALUE,
    OTHER_WORDS,
    Flow,
    Verdict,
    analysis,
    is_device_word,
    literal_is_device,
    swap,
)
from npu_migrate.python.rule import Rule


class DeviceLiteralRule(Rule):
    """Shared by NPU104 (rewrites) and NPU108 (reports): collects every literal that
    looks like a CUDA device during the pass; subclasses decide in ``leave_file``
    with the file-wide :func:`analysis`."""

    #: where "cuda" is written, and the helpers the analysis reads (Triton's backend...)
    local_triggers = ("cuda", OTHER_WORDS)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.candidates: list[cst.CSTNode] = []

    def visit_Call(self, node: cst.Call) -> None:
        # Resolve now: the engine checks, after the pass, which import names were relied on.
        self.qualified_name(node.func)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.ConcatenatedString) and parent.left is not node:
            return
        if literal_is_device(node):
            self.candidates.append(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if literal_is_device(node):
            self.candidates.append(node)
