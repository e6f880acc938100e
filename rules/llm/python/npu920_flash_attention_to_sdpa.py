"""NPU920: ``attn_implementation="flash_attention_2"`` -> ``"sdpa"``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.pipeline import attention
from npu_migrate.python.cst_util import string_value, with_string_value
from npu_migrate.python.rule import Example, Rule

from ._common import literals, values_for

#: Where transformers reads the attention implementation: the `from_pretrained` /
#: config keyword, the config attribute (public and private spelling), LLaVA's
#: `train(attn_implementation=...)` and InternVL's `llm_config.attn_implementation`.
KEYS = frozenset({"attn_implementation", "_attn_implementation"})
#: The CUDA flash-attention packages (FA2, FA3); "sdpa" is the implementation every
#: transformers release since 4.36 has and that reaches the NPU's fused attention.
FLASH = frozenset({"flash_attention_2", "flash_attention_3"})

CONSTRAINT = (
    "sdpa needs an attention mask per batch: packed/padding-free batches (DataCollatorWithFlattening, "
    "padding_free=True, position_ids restarting inside a row) rely on flash-attention's varlen path, so "
    "keep flash_attention_2 for them on transformers >= 4.51, which maps it to torch_npu.npu_fusion_attention"
)


CUSTOM = (
    'its own model classes may have no "sdpa" entry (InternVL\'s InternLM2 and Phi-3 have eager and flash_attention_2 '
    'only): use "eager" for those, "sdpa" for transformers\' own models, or keep "flash_attention_2" on transformers '
    ">= 4.51 (NPU fused attention) where packed batches need it"
)


class FlashAttentionToSdpa(Rule):
    id = "NPU920"
    name = "flash-attention-to-sdpa"
    summary = 'Use `attn_implementation="sdpa"` where code asks transformers for `"flash_attention_2"`'
    triggers = ("flash_attention_2", "flash_attention_3", "use_flash_attention_2")
    fixable = True
    rationale = f"""
`attn_implementation="flash_attention_2"` makes transformers load the CUDA
`flash_attn` package, which has no Ascend build: transformers 4.37.2 (LLaVA's
pin) raises `ImportError: ... flash_attn seems to be not installed` at model load
and never falls back. `"sdpa"` (torch's `scaled_dot_product_attention`) exists
in every transformers release since 4.36 and on Ascend dispatches to the fused
attention kernel; transformers' own NPU guidance (PR #36383) recommends it.
transformers 4.51 and later route `flash_attention_2` on NPU to
`torch_npu.npu_fusion_attention` (`integrations/npu_flash_attention.py`: present
in the 4.51.3, 4.53.3, 4.55.4 and 5.24.0 wheels, absent from 4.37.2 to 4.50.3),
so the rewrite is needed for the older pins and harmless on the newer ones.

Rewritten where the value is *written* for transformers: the keyword
(`from_pretrained(..., attn_implementation="flash_attention_2")`,
`train(attn_implementation=...)` in LLaVA's `train_mem.py`), an attribute or key
assignment (`config.llm_config.attn_implementation = 'flash_attention_2'` in
InternVL's train scripts, `kwargs['attn_implementation'] = ...` in LLaVA's
builder, a variable of that name), a dict entry, a parameter default, a
dataclass field of a `ModelArguments` (`attn_implementation: str =
field(default="flash_attention_2")`), argparse's
`add_argument("--attn_implementation", default="flash_attention_2")`, and both branches of
`'flash_attention_2' if use_flash_attn else 'eager'`. Comparisons
(`if config._attn_implementation == "flash_attention_2"`) and registries keyed
by the name (`LLAMA_ATTENTION_CLASSES['flash_attention_2'] = ...`) are left alone.
The old `use_flash_attention_2=True` keyword is reported.

Where the project registers its own flash-attention classes (a dict with a
`'flash_attention_2'` key and no `'sdpa'` one, as InternVL's
`INTERNLM2_ATTENTION_CLASSES = {{'eager': ..., 'flash_attention_2': ...}}`, or a
packed-training patch `LLAMA_ATTENTION_CLASSES['flash_attention_2'] = ...`),
`"sdpa"` may name a class its model code does not have (a `KeyError` at
model build), so the values are reported instead (project fact
`custom_flash_attention`, a text scan of the project's Python files).

Constraint: {CONSTRAINT}.

Decided from the project's facts (`npu_migrate/pipeline/attention.py`, shared with
NPU936 and NPU940):
- left as it is where every transformers requirement of the project's dependency
  files (requirements*.txt, setup.py `install_requires`, pyproject, setup.cfg,
  environment.yml; ranges included: `>=4.53.3`, `==5.15`, `~=4.51`) admits only
  releases >= 4.51: flash_attention_2 already runs on the NPU's fused attention;
- reported, never rewritten, where the same file configures packed or
  padding-free training (`DataCollatorWithFlattening`, `padding_free`, a
  `packing` option, `cu_seqlens`): sdpa would let packed sequences attend to each
  other, and training would run silently wrong;
- rewritten to "sdpa" otherwise.
"""
    examples = (
        Example(
            'model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="flash_attention_2")\n',
            'model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa")\n',
        ),
        Example("if config._attn_implementation == 'flash_attention_2':\n    pass\n"),
    )

    def _rewrite(self, node: cst.CSTNode) -> None:
        for value in values_for(node, KEYS):
            for literal in literals(value):
                old = string_value(literal)
                if old in FLASH and self.ctx.facts.custom_flash_attention:
                    self.report(literal, f'attention implementation "{old}": this project registers its own '
                                "flash-attention classes (an *_ATTENTION_CLASSES registry without \"sdpa\", or a "
                                "packed-training patch of the flash_attention_2 entry)", CUSTOM)
                elif old in FLASH and (decision := self._decision()) is not attention.Attention.REWRITE:
                    if decision is attention.Attention.PACKED:
                        self.report(literal, f'attention implementation "{old}": {attention.PACKED_MESSAGE}',
                                    attention.PACKED_SUGGESTION)
                    # KEEP: the project's transformers maps it to the NPU's fused attention
                elif old in FLASH:
                    self.replace(
                        literal, lambda n: with_string_value(n, "sdpa"),
                        f'attention implementation "{old}" -> "sdpa" (torch SDPA; fused attention on NPU)',
                        needs_torch_npu=False,
                    )

    def _decision(self) -> attention.Attention:
        if self._decided is None:
            self._decided = attention.decide(self.ctx.facts.transformers_specifier, self.ctx.text.encode(), code=True)
        return self._decided

    _decided: attention.Attention | None = None

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == "use_flash_attention_2":
            self.report(node, "`use_flash_attention_2` asks transformers for the CUDA flash-attn package",
                        'drop it and pass attn_implementation="sdpa" (fused attention on NPU)')
            return
        self._rewrite(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._rewrite(node)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._rewrite(node)

    def visit_Param(self, node: cst.Param) -> None:
        self._rewrite(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._rewrite(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._rewrite(node)
