"""NPU807: command-line options about CUDA or NCCL features."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule
from npu_migrate.tables.backends import is_backend_key
from npu_migrate.tables.devices import is_device_key

from ._arguments import array_words, launch_words, option_string_words

if TYPE_CHECKING:
    from tree_sitter import Node

_CUDA_WORD = re.compile(r"(?:^|[-_])(?:cuda|nccl|cudnn|nvtx|cublas|cudagraphs?)(?:$|[-_])", re.IGNORECASE)


class ShellCudaOption(ShellRule):
    id = "NPU807"
    name = "shell-cuda-option"
    summary = "Report options of training command lines that switch CUDA or NCCL features (`--cuda`, `--use-nccl-ub`, `--cuda-graph-impl`)"
    triggers = (b"cuda", b"nccl", b"cudnn", b"nvtx", b"cublas")
    fixable = False
    rationale = """
A flag such as `--cuda`, `--no-cuda`, `--cuda-graph-impl local`,
`--use-nccl-ub` or `--cudnn-benchmark` turns on a feature of the training
script that is tied to NVIDIA's stack. Whether it still means something on
Ascend depends on what the script does with it (the Python rules migrate the
script itself): a `--cuda` flag that picks the device may now pick the NPU,
while CUDA graphs and NCCL user buffers have no drop-in counterpart. Reported
on the options of training command lines, argument arrays and option strings
(the places NPU803/NPU804 rewrite values), once per option and line. Device
and backend options are NPU803/NPU804's.
"""
    examples = (
        Example("python train.py --cuda --epochs 3  # reported\n"),
        Example("python train.py --device npu --backend hccl\n"),
    )

    def visit_command(self, node: Node) -> None:
        self._check(launch_words(node))

    def visit_array(self, node: Node) -> None:
        self._check(array_words(node))

    def visit_variable_assignment(self, node: Node) -> None:
        value = node.child_by_field_name("value")
        if value is not None:
            self._check(option_string_words(value))

    def _check(self, words: list[syntax.Arg] | None) -> None:
        for word in words or ():
            text = word.text
            if not text.startswith("-"):
                continue
            name = text.partition("=")[0]
            if _CUDA_WORD.search(name.lstrip("-")) and not is_backend_key(name) and not is_device_key(name):
                self.report(word.node, f"`{name}` switches a CUDA/NCCL feature of the training script",
                            "check what the script does with it on Ascend: keep it if it now selects the NPU, "
                            "drop it for CUDA-only features (CUDA graphs: torch.npu.NPUGraph where the script "
                            "supports it; NCCL user buffers: no HCCL counterpart)", word.pieces[0].start)
