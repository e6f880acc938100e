"""NPU959: a bitsandbytes optimizer name set as a value (dataclass field default,
assignment, dict entry, parameter or argparse default)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.llm._routes import BNB_OPTIMIZERS
from npu_migrate.rules.llm.python._common import literals, values_for

#: names under which projects keep transformers' ``optim`` value
NAMES = frozenset({"optim", "optimizer", "optim_name", "optimizer_name", "optimizer_type"})
#: kohya-ss's optimizer types backed by bitsandbytes (sd-scripts / musubi-tuner
#: ``--optimizer_type AdamW8bit``; compared without case, as kohya's ``get_optimizer`` does)
KOHYA_BNB = frozenset({"adamw8bit", "pagedadamw8bit", "pagedadamw32bit", "lion8bit", "pagedlion8bit",
                       "sgdnesterov8bit", "ademamix8bit", "pagedademamix8bit", "pagedademamix32bit"})
#: how kohya's documentation and scripts spell them (the prefilter matches words exactly)
KOHYA_SPELLINGS = frozenset({"AdamW8bit", "PagedAdamW8bit", "PagedAdamW32bit", "Lion8bit", "PagedLion8bit",
                             "SGDNesterov8bit", "AdEMAMix8bit", "PagedAdEMAMix8bit", "PagedAdEMAMix32bit"})
ROUTE = ('use "adamw_torch_fused" (torch.optim.AdamW(fused=True), implemented by torch_npu) or "adamw_torch"; '
         "budget 8 bytes of optimizer state per parameter instead of 2")


class BnbOptimizerValue(Rule):
    id = "NPU959"
    impact = "blocking"
    name = "bnb-optimizer-value"
    fixable = False
    summary = ("Report bitsandbytes optimizer names (`paged_adamw_32bit`, `adamw_8bit`...) set as defaults or values: "
               "dataclass fields, assignments, dicts, parameters, argparse")
    triggers = (*sorted(BNB_OPTIMIZERS), *sorted(KOHYA_BNB), *sorted(KOHYA_SPELLINGS))
    rationale = f"""
transformers' `OptimizerNames` backed by bitsandbytes (`paged_adamw_32bit`,
`adamw_bnb_8bit`, `paged_lion_8bit`... `training_args.py`) import bitsandbytes'
CUDA kernels when the trainer builds its optimizer; no released bitsandbytes wheel
has an Ascend backend. NPU925 reports `TrainingArguments(optim=...)` and NPU937 /
NPU942 the launcher option and config key; this rule reports the same names where a
project keeps them itself: its own arguments dataclass
(`optim: str = field(default="paged_adamw_32bit")`), an assignment
(`args.optim = "adamw_8bit"`, `kwargs["optim"] = ...`), a dict entry, a parameter or
an `add_argument("--optim", default=...)` default, under the names
{", ".join(f"`{n}`" for n in sorted(NAMES))} (`optim=` keyword arguments are NPU925's), and
after such an option in a command line built as a list (`["--optimizer_type", "adamw8bit"]`);
kohya-ss's bitsandbytes types (`AdamW8bit`, `PagedAdamW8bit`, `Lion8bit`...) count, in any case.
Not rewritten: the optimizer changes the memory budget. Route: {ROUTE}.
"""
    examples = (
        Example(
            "from dataclasses import dataclass, field\n\n@dataclass\nclass Args:\n"
            '    optim: str = field(default="paged_adamw_32bit")  # reported\n'
        ),
        Example('from dataclasses import dataclass\n\n@dataclass\nclass Args:\n    optim: str = "adamw_torch"\n'),
    )

    def _check(self, node: cst.CSTNode) -> None:
        for value in values_for(node, NAMES):
            for literal in literals(value):
                self._bnb(literal)

    def _bnb(self, literal: cst.CSTNode) -> None:
        name = string_value(literal)
        if name in BNB_OPTIMIZERS or (name or "").lower() in KOHYA_BNB:
            self.report(literal, f'`"{name}"` is a bitsandbytes optimizer (its CUDA kernels are imported '
                        "when the trainer builds it)", ROUTE)

    def visit_List(self, node: cst.List) -> None:
        """A command line built as a list: ``["--optimizer_type", "adamw8bit"]`` (musubi-tuner's
        GUI, held-out round 20)."""
        values = [e.value for e in node.elements]
        for option, value in zip(values, values[1:]):
            if (string_value(option) or "").lstrip("-").replace("-", "_") in NAMES:
                self._bnb(value)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._check(node)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._check(node)

    def visit_Param(self, node: cst.Param) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value != "optim":  # optim= is NPU925's
            self._check(node)
