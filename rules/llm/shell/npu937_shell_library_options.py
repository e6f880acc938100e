"""NPU937: launcher options that switch on CUDA-only libraries of the LLM stack."""

from __future__ import annotations

from npu_migrate.rules.llm._routes import FLAGS, VALUED

from npu_migrate.pipeline.rulebase import Example

from ._options import OptionsRule, options, words_of


class ShellLibraryOptions(OptionsRule):
    id = "NPU937"
    name = "shell-library-options"
    summary = "Report launcher options that turn on CUDA-only LLM libraries (Liger, bitsandbytes, cpm_kernels, FP8, vLLM)"
    triggers = (b"liger", b"8bit", b"_8bit", b"bnb", b"load_in_", b"quantization", b"--bits", b"fp8", b"infer_backend",
                b"flash_attention_2", b"32bit", b"compile", b"dynamo_backend", b"mixed_precision")
    fixable = False
    rationale = """
What the launchers of the repositories read pass to their scripts, and what it
switches on: InternVL's `--use_liger True` (16 launchers), LLaVA's QLoRA
`--bits 4`, ChatGLM-6B's `--quantization_bit 4` (`ptuning/train.sh`,
`evaluate.sh`; cpm_kernels), diffusers' `--use_8bit_adam` (bitsandbytes'
AdamW8bit), HF's `--optim adamw_bnb_8bit`, LLaMA-Factory's `--fp8_backend
torchao` and `--infer_backend vllm`, vLLM's `--quantization awq`. None of these
has a drop-in Ascend build, and each has a different route (in the message),
so they are reported, not rewritten. Flags are reported when on (bare, or
`True`/`1`/`yes`), valued options for the listed values only.
"""
    examples = (
        Example("torchrun train.py --optim adamw_bnb_8bit  # reported\n"),
        Example("torchrun train.py --optim adamw_torch_fused --use_liger False\n"),
    )

    def _check(self, node) -> None:
        for option in options(words_of(node) or []):
            name = option.name.replace("-", "_").replace("__", "--", 1)
            if name in FLAGS and option.truthy:
                what, route = FLAGS[name]
                self.report(option.word.node, f"`{option.name}` {what}", route, option.word.pieces[0].start)
            elif name in VALUED and option.text is not None:
                values, what, route = VALUED[name]
                value = option.text.strip("\"'")
                if values is None or value in values:
                    self.report(option.word.node, f"`{option.name} {value}` {what}", route, option.word.pieces[0].start)
