"""NPU811: Slurm jobs that ask for GPUs (``#SBATCH --gres=gpu:8``, ``srun --gpus=8``)."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

#: the commands that take Slurm's job options
SLURM_COMMANDS = frozenset({"sbatch", "srun", "salloc"})
#: options that count or place Slurm's GRES ``gpu`` only
GPU_OPTIONS = frozenset(
    {"--gpus", "-G", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket",
     "--gpu-bind", "--gpu-freq", "--mem-per-gpu", "--cpus-per-gpu", "--ntasks-per-gpu"}
)
_DIRECTIVE = re.compile(r"#SBATCH[ \t]+")
#: one entry of a ``--gres`` list whose name is ``gpu`` (``gpu``, ``gpu:8``, ``gpu:a100:8``)
_GPU_GRES = re.compile(r"(?:^|,)gpu(?::|,|$)")
_SUGGESTION = (
    "request the NPUs under the GRES name your cluster's gres.conf gives them (see `scontrol show node` "
    "or ask the cluster's admins) with `--gres=<name>:<count>`; Slurm's --gpus* options count GRES `gpu` only"
)


class ShellSlurmGpus(ShellRule):
    id = "NPU811"
    impact = "blocking"
    name = "shell-slurm-gpus"
    summary = "Report Slurm options that ask for GPUs (`#SBATCH --gres=gpu:N`, `--gpus*`, `srun -G N`)"
    triggers = (b"gpu", b"-G")
    fixable = False
    rationale = """
A Slurm job script asks for its accelerators in `#SBATCH` directives, or on the
`sbatch`/`srun`/`salloc` command line: `--gres=gpu:8`, `--gpus=8`,
`--gpus-per-node=8`, `--gpus-per-task=1`, `--mem-per-gpu`... On an Ascend
partition those requests cannot be met (the job waits forever or is rejected),
or, where a site still names its NPUs `gpu`, they get no GPU-specific binding.
Each such option is reported.

Directives after the script's first command are ignored by sbatch, and here too.
It is not rewritten: Slurm has no built-in name for Ascend devices; the generic
resource is whatever the cluster's `gres.conf` declares (`npu` is common, but
it is the site's choice), and the `--gpus*` family exists for the GRES `gpu`
only. The suggestion says where to look the name up.
"""
    examples = (
        Example("#!/bin/bash\n#SBATCH --gres=gpu:8  # reported\nsrun python train.py\n"),
        Example("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\nsrun python train.py\n"),
    )

    def visit_comment(self, node: Node) -> None:
        text = node.text.decode("utf-8", "replace")
        match = _DIRECTIVE.match(text)
        if match is None or _after_first_command(node):
            return
        try:
            words = shlex.split(text[match.end():], comments=True)
        except ValueError:  # an unbalanced quote: sbatch would reject the line as well
            return
        for _, option in _gpu_options(words):
            at = text.find(option.split()[0])
            offset = node.start_byte + len(text[:at].encode()) if at >= 0 else None
            self.report(node, f"`#SBATCH {option}` asks Slurm for GPUs", _SUGGESTION, offset)

    def visit_command(self, node: Node) -> None:
        words = syntax.command_args(node)
        if not words or syntax.program(words[0]) not in SLURM_COMMANDS:
            return
        command = syntax.program(words[0])
        texts = []
        for word in words[1:]:
            if not word.text.startswith("-") and texts and not _takes_value(texts[-1]):
                break  # the program srun runs: its own options are not Slurm's
            texts.append(word.text)
        for index, option in _gpu_options(texts):
            self.report(node, f"`{command} {option}` asks Slurm for GPUs", _SUGGESTION, words[1 + index].node.start_byte)


def _after_first_command(comment: Node) -> bool:
    """sbatch reads ``#SBATCH`` lines up to the first command of the script only."""
    root = comment
    while root.parent is not None:
        root = root.parent
    first = next((child for child in root.children if child.type != "comment"), None)
    return first is not None and first.start_byte < comment.start_byte


def _takes_value(word: str) -> bool:
    """``-G 8``, ``--gres gpu:8``: an option whose value is the next word."""
    return word.startswith("-") and "=" not in word and word not in ("--exclusive", "--overcommit", "-l", "--label")


def _gpu_options(words: list[str]) -> list[tuple[int, str]]:
    """The options (``--gres=gpu:8``, ``--gpus=8``, ``-G 8``) that ask for GPUs, with the
    index of their first word."""
    found = []
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if not equals and index + 1 < len(words) and not words[index + 1].startswith("-"):
            value = words[index + 1]
            shown = f"{word} {value}"
        else:
            shown = word
        if name == "--gres" and _GPU_GRES.search(value):
            found.append((index, shown))
        elif name in GPU_OPTIONS or (name.startswith("-G") and name[2:].isdigit()):
            found.append((index, shown))
    return found
