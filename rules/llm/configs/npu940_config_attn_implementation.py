"""NPU940: ``attn_implementation: flash_attention_2`` -> ``sdpa`` in config files."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.pipeline import attention

KEYS = frozenset({"attn_implementation", "_attn_implementation"})
VALUES = {"flash_attention_2": "sdpa", "flash_attention_3": "sdpa"}


class ConfigAttnImplementation(ConfigRule):
    id = "NPU940"
    name = "config-attn-implementation"
    summary = "Use `sdpa` where a config file asks transformers for `flash_attention_2`"
    triggers = (b"flash_attention_2", b"flash_attention_3")
    fixable = True
    rationale = """
Argument files parsed into transformers' arguments (HfArgumentParser's
`parse_yaml_file`/`parse_json_file`, trl and LLaMA-Factory v1 YAML) and model
`config.json` files carry the attention implementation as
`attn_implementation` / `_attn_implementation`. `flash_attention_2` needs the
CUDA flash-attn package on transformers older than 4.51; `sdpa` reaches the
NPU's fused attention on every release (NPU920 has the facts and the
constraint on packed, padding-free batches). LLaMA-Factory's own key
`flash_attn: fa2` is left alone: its Ascend examples (`examples/ascend/*.yaml`)
use it. A model `config.json` with `auto_map` (remote code: InternVL,
InternLM2, ChatGLM) is reported instead of rewritten: its own modeling code may
have no sdpa class (see NPU920), and so is every value in a project that
registers its own flash-attention classes (project fact `custom_flash_attention`).

As NPU920 (`npu_migrate/pipeline/attention.py`): left as it is where every
transformers requirement of the project admits only releases >= 4.51, and
reported, never rewritten, where the same file turns on packing or padding-free
training (`packing: true`, `padding_free: true`, `neat_packing: true`).
"""
    examples = (
        Example("model_name_or_path: Qwen/Qwen3-0.6B\nattn_implementation: flash_attention_2\n",
                "model_name_or_path: Qwen/Qwen3-0.6B\nattn_implementation: sdpa\n"),
        Example("flash_attn: fa2\nattn_implementation: eager\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key or scalar.key not in KEYS or scalar.value not in VALUES:
            return
        new = VALUES[scalar.value]
        if self.file.facts.custom_flash_attention:
            self.report(scalar, f"attention implementation `{scalar.value}`: this project registers its own "
                        "flash-attention classes, which may have no sdpa entry",
                        "use `eager` for the project's own model classes, `sdpa` for transformers' own (see NPU920)")
        elif b'"auto_map"' in self.file.data or b"auto_map:" in self.file.data:
            self.report(scalar, f"attention implementation `{scalar.value}` of a remote-code model (`auto_map`): its "
                        "own modeling code may have no sdpa class (InternVL's InternLM2: eager and flash_attention_2)",
                        "use `eager` for such models, `sdpa` for transformers' own; transformers >= 4.51 runs "
                        "flash_attention_2 on NPU where the model code goes through transformers' flash-attention utils")
        elif (decision := attention.decide(self.file.facts.transformers_specifier, self.file.data)) \
                is attention.Attention.KEEP:
            return  # the project's transformers (>= 4.51) maps it to the NPU's fused attention
        elif decision is attention.Attention.PACKED:
            self.report(scalar, f"attention implementation `{scalar.value}`: {attention.PACKED_MESSAGE}",
                        attention.PACKED_SUGGESTION)
        elif scalar.editable:
            self.replace(scalar, new, f"attention implementation `{scalar.value}` -> `{new}` (fused attention on NPU)")
        else:
            self.report(scalar, f"attention implementation `{scalar.value}` needs the CUDA flash-attn package",
                        f"write `{new}`")
