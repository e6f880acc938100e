"""NPU955: ``ray start --num-gpus N`` becomes ``ray start --resources '{"NPU": N}'``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_EXPANSION = re.compile(r"\$(?:[A-Za-z_]\w*|\{[A-Za-z_]\w*\})")
_WHY = ('Ray counts Ascend devices as the resource "NPU", taken from --resources '
        "(ray 2.60.0: ray/_private/accelerators/npu.py, resource_and_label_spec.py)")


def ray_start(words: list[syntax.Arg]) -> int | None:
    """The index of ``start`` in ``ray start ...`` (also behind wrappers: ``srun ray start``)."""
    for index, word in enumerate(words[:-1]):
        if syntax.program(word) == "ray" and words[index + 1].text == "start":
            if index == 0 or syntax.program(words[0]) in syntax.WRAPPERS:
                return index + 1
            return None
    return None


class ShellRayStartGpus(ShellRule):
    id = "NPU955"
    name = "shell-ray-start-gpus"
    impact = "blocking"
    summary = "Rewrite `ray start --num-gpus N` to `ray start --resources '{\"NPU\": N}'`"
    triggers = (b"--num-gpus",)
    rationale = """
`ray start --num-gpus N` declares N GPUs on the node. Ray names Ascend devices
`"NPU"` (ray 2.60.0, `ray/_private/accelerators/npu.py`) and takes their count from
`--resources` (a JSON dictionary, `ray/scripts/scripts.py`; `resources.get("NPU")` in
`ray/_private/resource_and_label_spec.py`), else from the devices it finds. A node
started with `--num-gpus` offers GPUs that do not exist, and tasks asking for
`"NPU"` see none declared.

Rewritten when the count is a number (`--resources '{"NPU": 8}'`) or one variable
(`--resources "{\\"NPU\\": $NGPUS}"`, so the shell still expands it); a count of 0 is
left alone. Reported when the command already has `--resources` (merge the entry
into it) or the count is anything else.
"""
    examples = (
        Example("ray start --head --num-gpus 8 --block\n", "ray start --head --resources '{\"NPU\": 8}' --block\n"),
        Example(
            'ray start --address="$HEAD:6379" --num-gpus=$NGPUS\n',
            'ray start --address="$HEAD:6379" --resources "{\\"NPU\\": $NGPUS}"\n',
        ),
        Example("ray start --head --num-cpus 8\n"),
        Example("python train.py --num-gpus 8\n"),
    )

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        start = ray_start(words)
        if start is None:
            return
        options = words[start + 1:]
        has_resources = any(w.text == "--resources" or w.text.startswith("--resources=") for w in options)
        for index, word in enumerate(options):
            text = word.text
            if text == "--num-gpus" and index + 1 < len(options):
                value, end = options[index + 1], options[index + 1].node.end_byte
            elif text.startswith("--num-gpus="):
                value, end = word.after(len("--num-gpus=")), word.node.end_byte
            else:
                continue
            count = value.text
            if count.isdigit() and int(count) == 0:
                return
            if value.static and count.isdigit():
                new = f"--resources '{{\"NPU\": {count}}}'"
            elif _EXPANSION.fullmatch(count):
                new = f'--resources "{{\\"NPU\\": {count}}}"'
            else:
                new = None
            if new is None or has_resources:
                why = "the command already has --resources" if has_resources else "the count is not a number or one variable"
                self.report(word.node, f"`ray start {text}` declares GPUs ({why})",
                            f"declare the NPUs with `--resources '{{\"NPU\": N}}'` (merged into the existing "
                            f"--resources); {_WHY}")
                return
            self.replace(word.node.start_byte, end, new, f"`ray start --num-gpus {count}` -> `{new}`", reason=_WHY)
            return
