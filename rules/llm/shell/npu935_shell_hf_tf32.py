"""NPU935: ``--tf32 True`` removed from Hugging Face training command lines."""

from __future__ import annotations

import re

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell.targets import not_parsed_by_transformers

from ._options import OptionsRule, options, removal, words_of

HF32 = ("for Ascend's reduced-precision fp32 set torch.npu.matmul.allow_hf32 = True in the script "
        "(transformers has no NPU switch for it)")


class ShellHfTf32(OptionsRule):
    id = "NPU935"
    name = "shell-hf-tf32"
    summary = "Remove `--tf32 True` from training command lines (transformers raises without CUDA)"
    triggers = (b"--tf32",)
    fixable = True
    rationale = f"""
HF training scripts parse their command line into `TrainingArguments`, and
`--tf32 True` makes transformers raise `ValueError: --tf32 requires Ampere or a
newer GPU arch, cuda>=11 and torch>=1.7` whenever CUDA is unavailable (there
is no NPU exception; transformers 4.37.2 to 5.24.0). LLaVA passes it in 11 of
its launchers (`scripts/v1_5/finetune.sh`...), FastChat in its training
scripts and README, stanford_alpaca in its README command, InternVL in 21
launcher lines. The option and its value are removed (with the whole
continuation line when they are all it holds, so `\\` chains stay intact);
`--tf32 False` is left alone. {HF32}. Where the launched script is the
project's and names neither `TrainingArguments` nor `HfArgumentParser`, the option
is its own (LLM-Shearing's fire-based `inference.py` sets torch's TF32 switches
with it, harmless on Ascend): reported, not removed. The same holds for options kept in
a variable (`GPT_ARGS="... --tf32 True"`) or an array that such a launch expands
(`torchrun ... pretrain_gpt.py $GPT_ARGS`): reported at the assignment, as on the launch
line.
"""
    examples = (
        Example("torchrun --nproc_per_node=8 train.py \\\n    --bf16 True \\\n    --tf32 True \\\n    --output_dir out\n",
                "torchrun --nproc_per_node=8 train.py \\\n    --bf16 True \\\n    --output_dir out\n"),
        Example("torchrun --nproc_per_node=8 train.py --tf32 False\n"),
    )

    def _check(self, node) -> None:
        for option in options(words_of(node) or []):
            if option.name != "--tf32" or not option.truthy:
                continue
            own = (not_parsed_by_transformers(node, self.file.facts) if node.type == "command"
                   else self._own_where_expanded(node))
            if own is not None:
                self.report(option.word.node, f"`--tf32 True` is passed to `{own}`, which names neither "
                            "TrainingArguments nor HfArgumentParser: left as its own option",
                            f"remove it only if it reaches transformers' TrainingArguments; {HF32}",
                            offset=next((p.start for p in option.word.pieces if p.start is not None), None))
                continue
            span = removal(self.file.data, option)
            if span is None:
                self.report(option.word.node, "`--tf32 True` makes transformers raise without CUDA",
                            f"remove the option; {HF32}")
                continue
            self.replace(span[0], span[1], "", f"`--tf32 True` removed: transformers raises without CUDA; {HF32}")

    def _own_where_expanded(self, node) -> str | None:
        """For options kept in a variable (an option string or an array): the script of a
        launch in this file that expands the variable and is not parsed by transformers
        (what :func:`not_parsed_by_transformers` says of that launch line), else None."""
        assignment = node if node.type == "variable_assignment" else node.parent
        name = assignment.child_by_field_name("name") if assignment is not None else None
        if name is None or not name.text:
            return None
        expansion = re.compile(rb"\$\{?" + re.escape(name.text) + rb"(?![A-Za-z0-9_])")
        stack = [self.file.root]
        while stack:
            current = stack.pop()
            if current.type == "command" and expansion.search(current.text or b""):
                own = not_parsed_by_transformers(current, self.file.facts)
                if own is not None:
                    return own
            stack.extend(current.children)
        return None
