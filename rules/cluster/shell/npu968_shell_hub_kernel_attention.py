"""NPU968: ``--attn_implementation kernels-community/...`` in launchers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.rules.cluster._hub import HUB_KERNEL, ROUTE
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

OPTIONS = frozenset({"--attn_implementation", "--attn-implementation", "--model.attn_implementation",
                     "--model_args.attn_implementation"})


class ShellHubKernelAttention(ShellRule):
    id = "NPU968"
    name = "shell-hub-kernel-attention"
    impact = "blocking"
    fixable = False
    summary = "Report launchers that pass a Hub kernel as the attention implementation (`--attn_implementation kernels-community/...`)"
    triggers = (b"attn",)
    rationale = f"""
The launcher form of NPU961: a training command line (`python`, `torchrun`,
`accelerate launch`, `deepspeed`... behind wrappers too) that passes a Hugging Face
Hub kernel repository (`org/name`, optionally `@revision`, `:kernel`) as
`--attn_implementation`. kernels-community's attention repositories publish no CANN
build, so loading the model fails on Ascend. Route: {ROUTE}. Values behind variables
are not followed.
"""
    examples = (
        Example("torchrun train.py --attn_implementation kernels-community/flash-attn3  # reported\n"),
        Example("torchrun train.py --attn_implementation sdpa\n"),
    )

    def visit_command(self, node: Node) -> None:
        launch = syntax.launch_args(node)
        if launch is None:
            return
        for name, value in syntax.option_values(launch[1]):
            if name in OPTIONS and value.static and HUB_KERNEL.fullmatch(value.text):
                self.report(node, f"attention implementation `{value.text}` is a Hub kernel (CUDA builds only)", ROUTE,
                            offset=value.node.start_byte)
