"""NPU942: config keys that turn on CUDA-only libraries of the LLM stack."""

from __future__ import annotations

import re

from npu_migrate.rules.llm._routes import BNB_OPTIMIZERS, FLAGS, VALUED

from npu_migrate.configs.rule import ConfigRule, Example

from ._values import TRUE, literal_after

#: key -> (values that are reported, or None for any value; what it does; route)
_VALUED = {name.lstrip("-"): spec for name, spec in VALUED.items()}
_VALUED["optimizer"] = (BNB_OPTIMIZERS, "is a bitsandbytes optimizer", VALUED["--optim"][2])
_VALUED["fp8"] = (frozenset(TRUE), "trains in FP8", VALUED["--fp8_backend"][2])
#: accelerate configs: `fp8_config: {backend: TE}` and upper-case dynamo backends
_VALUED["fp8_backend"] = (frozenset({"torchao", "te", "msamp", "auto", "TE", "MSAMP", "AO"}), *VALUED["--fp8_backend"][1:])
_FLAGS = {name.lstrip("-"): spec for name, spec in FLAGS.items()}
#: DeepSpeed config sections whose op has only a CUDA builder (op_builder/npu has none)
_DEEPSPEED_OPS = {
    "sparse_attention": ("DeepSpeed's `sparse_attention` needs its sparse-attention op, which has no NPU builder",
                         ("remove the section and use dense attention (attn_implementation sdpa / "
                          "torch_npu.npu_fusion_attention)")),
    "random_ltd": ("DeepSpeed's `random_ltd` (data efficiency) needs its random-LTD op, which has no NPU builder",
                   "remove the random_ltd section (train on all tokens)"),
}
_NUMBER = re.compile(r"[0-9][0-9_.e+-]*")


class ConfigLibraryOptions(ConfigRule):
    id = "NPU942"
    name = "config-library-options"
    summary = "Report config keys that turn on CUDA-only LLM libraries (Liger, bitsandbytes, quantization, FP8, vLLM)"
    triggers = (b"liger", b"8bit", b"bnb", b"load_in_", b"quantization_bit", b"fp8", b"infer_backend", b"32bit",
                b"sparse_attention", b"random_ltd", b"compile", b"dynamo_backend")
    fixable = False
    rationale = """
The same switches as NPU937's launcher options, written in argument files:
LLaMA-Factory's YAML recipes (`quantization_bit: 4` in
`examples/train_qlora/*.yaml`, `fp8: true` / `fp8_backend: torchao` in
`examples/extras/fp8/`, `enable_liger_kernel: true`, v1's
`kernel_config: {name: liger_kernel}`, `infer_backend: vllm`), HF argument
files (`optim: adamw_bnb_8bit`, `load_in_4bit: true`, `use_liger_kernel:
true`), and DeepSpeed configs passed to `--deepspeed` whose
`sparse_attention` or `random_ltd` section needs a DeepSpeed op that has
no NPU builder (NPU912 lists the ops that have one), and accelerate configs
(`mixed_precision: fp8`, `fp8_config: {backend: TE}`, `dynamo_config:
{dynamo_backend: INDUCTOR}`). Each is reported with its Ascend route.
"""
    examples = (
        Example("quantization_bit: 4  # reported\nquantization_method: bnb\n"),
        Example("optim: adamw_torch_fused\nenable_liger_kernel: false\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if scalar.is_key:
            self._key(scalar)
        elif scalar.key in _VALUED and scalar.value in (_VALUED[scalar.key][0] or ()):
            _, what, route = _VALUED[scalar.key]
            self.report(scalar, f"`{scalar.key}: {scalar.value}` {what}", route)
        elif scalar.key == "name" and len(scalar.keys) >= 2 and scalar.keys[-2] == "kernel_config" and scalar.value == "liger_kernel":
            what, route = FLAGS["--enable_liger_kernel"]
            self.report(scalar, f"`kernel_config.name: {scalar.value}` {what}", route)

    def _key(self, key) -> None:
        name = key.value
        if name in _DEEPSPEED_OPS:
            self.report(key, *_DEEPSPEED_OPS[name])
            return
        found = literal_after(self.file.data, key)
        if found is None:
            return
        value = found[0]
        if value not in TRUE and not _NUMBER.fullmatch(value):
            return  # a string: visited as a value scalar
        if name in _FLAGS and value in TRUE:
            what, route = _FLAGS[name]
            self.report(key, f"`{name}: {value}` {what}", route)
        elif name in _VALUED:
            values, what, route = _VALUED[name]
            if values is None or value in values:
                self.report(key, f"`{name}: {value}` {what}", route)
