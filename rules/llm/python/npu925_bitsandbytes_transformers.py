"""NPU925: bitsandbytes reached through transformers: ``BitsAndBytesConfig``,
``load_in_4bit/8bit=True``, ``optim="adamw_bnb_8bit"``."""

from __future__ import annotations

import libcst as cst
from npu_migrate.rules.llm._routes import BNB_OPTIMIZERS

from npu_migrate.python.cst_util import last_name, string_value
from npu_migrate.python.rule import Example, Rule

ROUTE = (
    "no released bitsandbytes wheel ships an Ascend backend (0.50.2 lists 'npu' as a device but its wheel has only "
    "cpu/cuda/xpu/hpu/mps/triton backends; LLaMA-Factory's QLoRA-on-NPU recipe builds bitsandbytes from source "
    "with its Ascend backend, NF4 only)"
)
QUANT = f"load the model in bf16 (torch_dtype=torch.bfloat16) and train LoRA on it; {ROUTE}"
OPTIM = ('use optim="adamw_torch_fused" (torch.optim.AdamW(fused=True), implemented by torch_npu) or '
         '"adamw_torch"; budget 8 bytes of optimizer state per parameter instead of 2')


class BitsandbytesTransformers(Rule):
    id = "NPU925"
    impact = "blocking"
    name = "bitsandbytes-transformers"
    summary = "Report bitsandbytes quantization and 8-bit optimizers requested through transformers arguments"
    triggers = ("BitsAndBytesConfig", "load_in_4bit", "load_in_8bit", *sorted(BNB_OPTIMIZERS))
    fixable = False
    rationale = f"""
transformers reaches bitsandbytes without the file importing it (NPU906 reports
the imports): `quantization_config=BitsAndBytesConfig(load_in_4bit=True, ...)`
(LLaVA's `train.py` and `builder.py`, FastChat's `train_lora.py`), the old
`from_pretrained(..., load_in_8bit=True)` keywords (LLaVA, FastChat's model
adapter), and the bitsandbytes optimizers of `TrainingArguments(optim=...)`
(`adamw_bnb_8bit`, `paged_adamw_8bit`, `lion_8bit`...). On Ascend: {ROUTE}.
So QLoRA becomes LoRA on a bf16 model ({QUANT.split(';')[0]}), and the 8-bit
optimizers become a full-precision one ({OPTIM}). Only literal `True` and
literal optimizer names are reported (`load_in_4bit=training_args.bits == 4`
is the project's own switch; the launcher's value is reported by NPU937).

Code that *always* loads its model this way cannot run on Ascend until the
quantization is dropped, so its device code is left as it is and this finding
says so (`npu_migrate/python/quantized.py`): the function whose
`from_pretrained(...)` call has a literal `load_in_8bit=True`/`load_in_4bit=True`
or gets a `BitsAndBytesConfig(...)` (directly, or through a name assigned from it
in the same function) on every path, not under an `if`, a conditional expression, a
`try`, a loop or a boolean operator; the whole class when that function is its
`__init__`; a script's or notebook's top level when the load is there
(`if __name__ == "__main__":` counts as every path). alpaca-lora's
`finetune.py` and llama-cookbook's Llama Guard checker are such code (held-out
rounds 15 and 17). A config dict that only names the quantization (xtuner's
`quantization_config=dict(type=BitsAndBytesConfig, load_in_4bit=True)`) is not
a load: its file is migrated as usual. Run npu-migrate again once the model
loads in bf16.
"""
    examples = (
        Example("from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)  # reported\n"),
        Example("from transformers import TrainingArguments\nargs = TrainingArguments('out', optim='adamw_torch_fused')\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if (self.qualified_name(node.func) or "").endswith("BitsAndBytesConfig") or last_name(node.func) == "BitsAndBytesConfig":
            self.report(node, "`BitsAndBytesConfig(...)` quantizes the model with bitsandbytes' CUDA kernels", QUANT)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None:
            return
        keyword = node.keyword.value
        if keyword in ("load_in_4bit", "load_in_8bit") and isinstance(node.value, cst.Name) and node.value.value == "True":
            owner = self.ctx.parent(node)
            if isinstance(owner, cst.Call) and last_name(owner.func) == "BitsAndBytesConfig":
                return  # the config call is the finding
            self.report(node, f"`{keyword}=True` quantizes the model with bitsandbytes", QUANT)
        elif keyword == "optim" and string_value(node.value) in BNB_OPTIMIZERS:
            self.report(node, f'`optim="{string_value(node.value)}"` is a bitsandbytes optimizer', OPTIM)
