"""NPU936: ``--attn_implementation flash_attention_2`` -> ``sdpa`` on training command lines."""

from __future__ import annotations

from npu_migrate.rules.shell._arguments import ValueRule

from npu_migrate.pipeline import attention
from npu_migrate.pipeline.rulebase import Example

#: option / variable names (normalized: lower case, `-` as `_`, no leading dashes)
KEYS = frozenset({"attn_implementation", "_attn_implementation", "attention_implementation"})
#: flash-attention values -> sdpa. LLaMA-Factory's own `flash_attn: fa2` is left alone: its
#: Ascend examples (examples/ascend/*.yaml) use it, on transformers that map FA2 to the NPU kernel.
VALUES = {"flash_attention_2": "sdpa", "flash_attention_3": "sdpa"}


class ShellAttnImplementation(ValueRule):
    id = "NPU936"
    name = "shell-attn-implementation"
    summary = "Use `sdpa` where a launcher asks for the `flash_attention_2` attention implementation"
    triggers = (b"flash_attention_2", b"flash_attention_3")
    fixable = True
    kind = "attention implementation"
    rationale = """
Launchers pass the attention implementation to the training script
(`--attn_implementation flash_attention_2`, `model.attn_implementation=...`
overrides); the script hands it to
`from_pretrained(attn_implementation=...)`, which needs the CUDA flash-attn
package. `sdpa` reaches the NPU's fused attention through
`torch.nn.functional.scaled_dot_product_attention` (see NPU920 for the
transformers facts and the constraint on packed, padding-free batches). The value is rewritten
in options, Hydra-style `key=value` overrides, argument arrays, option
strings and variables named after the option (`ATTN_IMPLEMENTATION=...`).
LLaMA-Factory's `flash_attn fa2` is left alone: its own Ascend examples
(`examples/ascend/*.yaml`) use `fa2`, which it runs through transformers'
NPU flash-attention (transformers >= 4.51). In a project that registers its
own flash-attention classes (project fact `custom_flash_attention`, see
NPU920) the value is reported instead. As NPU920
(`npu_migrate/pipeline/attention.py`): left as it is where every transformers
requirement of the project admits only releases >= 4.51, and reported where the
same launcher turns on packing or padding-free training (`--packing`,
`--padding_free True`).
"""
    examples = (
        Example("torchrun train.py --attn_implementation flash_attention_2 --bf16 True\n",
                "torchrun train.py --attn_implementation sdpa --bf16 True\n"),
        Example("torchrun train.py --attn_implementation eager\n"),
    )

    @classmethod
    def is_key(cls, name: str) -> bool:
        return name.lstrip("-").rsplit(".", 1)[-1].lower().replace("-", "_") in KEYS

    @classmethod
    def new_value(cls, value: str) -> str | None:
        return VALUES.get(value)

    def _rewrite(self, value, where: str, new: str | None = None) -> None:
        if self.file.facts.custom_flash_attention and (new or self.new_value(value.text)):
            self.report(value.node, f"attention implementation `{value.text}` of {where}: this project registers its own "
                        "flash-attention classes, which may have no sdpa entry",
                        'use "eager" for the project\'s own model classes, "sdpa" for transformers\' own (see NPU920)')
            return
        if new or self.new_value(value.text):
            decision = attention.decide(self.file.facts.transformers_specifier, self.file.data)
            if decision is attention.Attention.KEEP:
                return  # the project's transformers (>= 4.51) maps it to the NPU's fused attention
            if decision is attention.Attention.PACKED:
                self.report(value.node, f"attention implementation `{value.text}` of {where}: "
                            f"{attention.PACKED_MESSAGE}", attention.PACKED_SUGGESTION)
                return
        super()._rewrite(value, where, new)
