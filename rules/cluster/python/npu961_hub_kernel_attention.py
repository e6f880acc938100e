"""NPU961: ``attn_implementation="kernels-community/..."``: a Hub kernel as the attention implementation."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.cluster._hub import HUB_KERNEL, ROUTE
from npu_migrate.rules.llm.python._common import literals, values_for

NAMES = frozenset({"attn_implementation", "_attn_implementation", "attention_implementation"})


class HubKernelAttention(Rule):
    id = "NPU961"
    impact = "blocking"
    name = "hub-kernel-attention"
    fixable = False
    summary = 'Report `attn_implementation="kernels-community/..."`: a Hub kernel without a CANN build'
    triggers = ("attn_implementation", "attention_implementation")
    rationale = f"""
transformers accepts a Hugging Face Hub kernel repository as the attention
implementation (`attn_implementation="kernels-community/flash-attn3"`,
`"kernels-community/vllm-flash-attn3"`): it loads the kernel through the `kernels`
package, which picks the build of the running backend. kernels-community's
attention repositories publish CUDA (and some ROCm/XPU/Metal) builds, no CANN one,
so on Ascend loading the model fails. NPU927 reports the `kernels` package's own
calls; this rule reports a repository id (`org/name`, optionally `@revision` and
`:kernel`) given as the attention implementation: as a keyword argument, an
assignment, a dict entry, a dataclass or parameter default. Route: {ROUTE}.
Not rewritten: whether the repository has a CANN build is not known offline.
"""
    examples = (
        Example('model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="kernels-community/flash-attn3")'
                "  # reported\n"),
        Example('model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa")\n'),
    )

    def _check(self, node: cst.CSTNode) -> None:
        for value in values_for(node, NAMES):
            for literal in literals(value):
                text = string_value(literal) or ""
                if HUB_KERNEL.fullmatch(text):
                    self.report(literal, f'attention implementation `"{text}"` is a Hub kernel (CUDA builds only)', ROUTE)

    def visit_Arg(self, node: cst.Arg) -> None:
        self._check(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._check(node)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._check(node)

    def visit_Param(self, node: cst.Param) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)
