"""NPU921: ``TrainingArguments(tf32=True)`` -> the argument removed."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import last_name
from npu_migrate.python.rule import Example, Rule

from ._common import without_keyword

#: transformers' TrainingArguments and its subclasses (Seq2SeqTrainingArguments, trl's
#: SFTConfig/DPOConfig/GRPOConfig, project subclasses such as LLaVA's TrainingArguments).
_ARGUMENTS = re.compile(r"\w*(TrainingArguments|Arguments|Config|Args)")
_LIBRARIES = ("transformers.", "trl.", "optimum.", "peft.")

HF32 = (
    "if the run relied on TF32 speed for fp32 matmuls, set torch.npu.matmul.allow_hf32 = True "
    "(Ascend's HF32, default off) after import torch_npu"
)


class HfTf32Argument(Rule):
    id = "NPU921"
    name = "hf-tf32-argument"
    summary = "Remove `tf32=True` from `TrainingArguments(...)` (transformers raises without CUDA)"
    triggers = ("tf32",)
    fixable = True
    rationale = f"""
`TrainingArguments(tf32=True)` makes transformers call `enable_tf32(True)` when
`is_torch_tf32_available()`, and otherwise raise `ValueError: --tf32 requires
Ampere or a newer GPU arch, cuda>=11 and torch>=1.7` (`training_args.py`,
`__post_init__`; the same in transformers 4.37.2, 4.57 and 5.24.0). That check
is CUDA-only: there is no NPU exception for tf32 (there is one for bf16), so
every job that passes `tf32=True` dies in argument parsing on Ascend. Without
the argument (`tf32=None`) transformers leaves the matmul precision alone,
which on NPU means full fp32 unless HF32 is switched on.

The keyword is removed from calls of `TrainingArguments` and its relatives
(`Seq2SeqTrainingArguments`, trl's `SFTConfig`, project subclasses named
`...Arguments`/`...Config`/`...Args`, or anything imported from transformers,
trl, optimum or peft). `tf32=False` is left alone (it raises nothing). The
launchers' `--tf32 True` is NPU935's, config files' `tf32: true` NPU941's.
HF32: {HF32}.
"""
    examples = (
        Example(
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out', bf16=True, tf32=True)\n",
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out', bf16=True)\n",
        ),
        Example("from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out', tf32=False)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "tf32"), None)
        if arg is None or not (isinstance(arg.value, cst.Name) and arg.value.value == "True"):
            return
        qualified = self.qualified_name(node.func) or ""
        name = last_name(node.func) or ""
        if not (qualified.startswith(_LIBRARIES) or _ARGUMENTS.fullmatch(name)):
            return
        self.replace(node, lambda n: without_keyword(n, "tf32"),
                     f"`tf32=True` removed from `{name}(...)`: transformers raises without CUDA; {HF32}",
                     needs_torch_npu=False, anchor=arg)
