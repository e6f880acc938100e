"""NPU941: ``tf32: true`` in argument files -> ``false``."""

from __future__ import annotations

from npu_migrate.configs.rule import ConfigRule, Example

from ._values import TRUE, literal_after

FALSE = {"true": "false", "True": "False", "TRUE": "FALSE", "yes": "no", "Yes": "No", "on": "off", "On": "Off"}
HF32 = "for Ascend's HF32 set torch.npu.matmul.allow_hf32 = True in the training script"


class ConfigHfTf32(ConfigRule):
    id = "NPU941"
    name = "config-hf-tf32"
    summary = "Turn `tf32: true` off in argument files (transformers raises without CUDA)"
    triggers = (b"tf32",)
    fixable = True
    rationale = f"""
YAML/JSON argument files parsed into `TrainingArguments` (HfArgumentParser's
`parse_yaml_file`/`parse_json_file`, LLaMA-Factory, trl) with `tf32: true` make
transformers raise `ValueError: --tf32 requires Ampere or a newer GPU arch` when
CUDA is unavailable (NPU921 has the facts). The value is set to `false`, in
the file's own spelling (`True` -> `False`, `yes` -> `no`): with `tf32=False`
transformers only switches TF32 off where TF32 exists and raises nothing
(`training_args.py`, `__post_init__`), so on NPU it is the same as leaving it
unset, and the edit keeps every other byte of the file (JSON commas and
comments included). {HF32}.
"""
    examples = (
        Example("bf16: true\ntf32: true\n", "bf16: true\ntf32: false\n"),
        Example("tf32: false\n"),
    )

    def visit_scalar(self, scalar) -> None:
        if not scalar.is_key or scalar.value != "tf32":
            return
        found = literal_after(self.file.data, scalar)
        if found is None or found[0] not in TRUE:
            return
        value, start, end = found
        self.file.recorder.replace(start, end, FALSE[value], self.id,
                                   f"`tf32: {value}` -> `{FALSE[value]}`: transformers raises without CUDA; {HF32}")
