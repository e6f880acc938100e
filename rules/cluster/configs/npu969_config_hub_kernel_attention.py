"""NPU969: ``attn_implementation: kernels-community/...`` in config files."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example
from npu_migrate.rules.cluster._hub import HUB_KERNEL, ROUTE

KEYS = frozenset({"attn_implementation", "_attn_implementation", "attention_implementation"})


class ConfigHubKernelAttention(ConfigRule):
    id = "NPU969"
    name = "config-hub-kernel-attention"
    impact = "blocking"
    fixable = False
    summary = "Report config files that name a Hub kernel as the attention implementation (`attn_implementation: kernels-community/...`)"
    triggers = (b"attn_implementation", b"attention_implementation")
    rationale = f"""
The config-file form of NPU961 (argument YAML/JSON of TRL, LLaMA-Factory, axolotl;
a model's `config.json`): a value under `attn_implementation` that is a Hugging Face
Hub kernel repository (`org/name`, optionally `@revision`, `:kernel`). Route: {ROUTE}.
"""
    examples = (
        Example("model_name_or_path: Qwen/Qwen2.5-7B\nattn_implementation: kernels-community/flash-attn3  # reported\n"),
        Example("attn_implementation: sdpa\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if not scalar.is_key and scalar.key in KEYS and HUB_KERNEL.fullmatch(scalar.value):
            self.report(scalar, f"attention implementation `{scalar.value}` is a Hub kernel (CUDA builds only)", ROUTE)
