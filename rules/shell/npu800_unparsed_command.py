"""NPU800: a command the shell parser cannot read, holding something to migrate."""

from __future__ import annotations

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell.rule import ShellRule


class ShellUnparsedCommand(ShellRule):
    """Documentation only: ``npu_migrate/shell/engine.py`` reports these."""

    id = "NPU800"
    name = "shell-unparsed-command"
    summary = "Report a shell command that cannot be parsed and mentions something the shell rules migrate; it is left unchanged"
    fixable = False
    rationale = """
tree-sitter recovers from a syntax error by keeping it inside the top-level
command that holds it, so the rest of a script is still migrated. That one
command is left exactly as it is: its tree cannot be trusted. When it contains
a word one of the selected shell rules looks for (`CUDA_`, `NCCL_`, `nccl`,
`cuda`, `nvidia-smi`, `torch.distributed.launch`), it is reported here so that
nothing is skipped silently. Often the script is not valid shell at all
(documentation templates with `<PATH>` placeholders; `bash -n script.sh`
tells); sometimes the parser lacks a rare form (`${A:$B+1}`).

A template's placeholder breaks more than its own line: tree-sitter's recovery
folds the lines after `ROOT=<ROOT_PATH>` into the same broken command. When
every broken command breaks at one whole line that is not shell on its own (not
a continued line (`\\` at its end), not an unclosed quote), the file is read again without
those lines: this finding moves to that line, and what the other rules find in
the rest of the broken command (a CUDA image assigned two lines below the
placeholder, `export CUDA_VISIBLE_DEVICES`) is reported at its own line under
its own rule id, never rewritten, since the script as written does not run.
"""
    examples = (
        Example("export CUDA_VISIBLE_DEVICES=0\n"),
    )
