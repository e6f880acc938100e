"""NPU806: ``python -m torch.distributed.launch`` in shell scripts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npu_migrate.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_MODULE = "torch.distributed.launch"
_DROPPED = {"--use_env", "--use-env"}


class ShellDistributedLaunch(ShellRule):
    id = "NPU806"
    name = "shell-distributed-launch"
    summary = "Report `python -m torch.distributed.launch` with the equivalent torchrun command line"
    triggers = (_MODULE.encode(),)
    fixable = False
    rationale = """
`torch.distributed.launch` is deprecated in torch 2.x in favour of `torchrun`,
which torch_npu supports as it is (and `torch_npu_run`, its variant for large
clusters). It is reported, not rewritten, because the switch changes what the
training script receives: `torch.distributed.launch` passes `--local_rank=N`
(or `--local-rank=N`) on the script's command line unless `--use_env` is
given, while torchrun only sets `LOCAL_RANK` in the environment. The
suggestion is the same command line with `torchrun` (launcher options kept,
`--use_env` dropped); the script must then read
`int(os.environ["LOCAL_RANK"])`.
"""
    examples = (
        Example("python -m torch.distributed.launch --nproc_per_node=8 --use_env train.py --epochs 3  # reported\n"),
        Example("torchrun --nproc_per_node=8 train.py\n"),
    )

    def visit_command(self, node: Node) -> None:
        launch = syntax.launch_args(node)
        if launch is None or launch[0] != "python":
            return
        words = launch[1]
        for index, word in enumerate(words):
            text = word.text
            if text in ("-m" + _MODULE,) or (text == "-m" and index + 1 < len(words) and words[index + 1].text == _MODULE):
                rest = words[index + (1 if text != "-m" else 2) :]
                kept = " ".join(w.text for w in rest if w.text not in _DROPPED)
                self.report(
                    node,
                    "`python -m torch.distributed.launch` is deprecated; use torchrun (supported by torch_npu)",
                    f"torchrun {kept}".rstrip()
                    + "  (torchrun sets LOCAL_RANK in the environment instead of passing --local_rank:"
                    " read int(os.environ['LOCAL_RANK']) in the script)",
                )
                return
            if not text.startswith("-"):
                return  # the script: python's own options are over
