"""NPU806: ``python -m torch.distributed.launch`` in shell scripts."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

if TYPE_CHECKING:
    from tree_sitter import Node

_MODULE = "torch.distributed.launch"
_DROPPED = {"--use_env", "--use-env"}
#: the interpreter at the end of what precedes its arguments (`... python3 `)
_LAUNCHER_TAIL = re.compile(r"(?:^|\s)\S*python[\d.]*\s*$")


_CONTINUATION = re.compile(r"\\\r?\n")

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
`--use_env` dropped), as the other rules leave it (`--dist-backend hccl`, not
the `nccl` it had before NPU803 rewrote it); the script must then read
`int(os.environ["LOCAL_RANK"])`.
"""
    examples = (
        Example("python -m torch.distributed.launch --nproc_per_node=8 --use_env train.py --epochs 3  # reported\n"),
        Example("torchrun --nproc_per_node=8 train.py\n"),
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.launches: list[tuple[Node, list]] = []

    def visit_command(self, node: Node) -> None:
        launch = syntax.launch_args(node)
        if launch is None or launch[0] != "python":
            return
        words = launch[1]
        if not words:
            return
        for index, word in enumerate(words):
            text = word.text
            if text in ("-m" + _MODULE,) or (text == "-m" and index + 1 < len(words) and words[index + 1].text == _MODULE):
                self.launches.append((node, words[index + (1 if text != "-m" else 2) :], words[0]))
                return
            if not text.startswith("-"):
                return  # the script: python's own options are over

    def leave_file(self) -> None:
        # The suggestion is built once every rule has recorded its edits, from the words
        # as the migration leaves them (`--dist-backend hccl --device npu`), so copying it
        # does not undo NPU803/NPU804.
        for node, rest, first in self.launches:
            prefix = self._prefix(node, first)
            kept = " ".join(self._migrated(w) for w in rest if w.text not in _DROPPED)
            self.report(
                node,
                "`python -m torch.distributed.launch` is deprecated; use torchrun (supported by torch_npu)",
                f"{prefix}torchrun {kept}".rstrip()
                + "  (torchrun sets LOCAL_RANK in the environment instead of passing --local_rank:"
                " read int(os.environ['LOCAL_RANK']) in the script)",
            )

    def _prefix(self, node: Node, first) -> str:
        """What stands before ``python`` on the command line (``ASCEND_RT_VISIBLE_DEVICES=0,1``,
        ``srun -N 2``), as the other rules leave it; empty where it cannot be told."""
        start = next((p.start for p in first.pieces if p.start is not None), None)
        if start is None or not node.start_byte <= start <= node.end_byte:
            return ""
        text = self._edited(node.start_byte, start)
        match = _LAUNCHER_TAIL.search(text)
        return text[: match.start()].strip() + " " if match and text[: match.start()].strip() else ""

    def _edited(self, start: int, end: int) -> str:
        data = self.file.data
        out, cursor = bytearray(), start
        for edit in sorted((e for e in self.file.recorder.edits if e.rule != self.id and start <= e.start and e.end <= end),
                           key=lambda e: (e.start, e.end)):
            if edit.start < cursor:
                continue
            out += data[cursor:edit.start] + edit.new
            cursor = edit.end
        out += data[cursor:end]
        # a line continuation before `python` (`PYTHONPATH=... \<newline>python -m ...`)
        # is whitespace on one line; kept, the pasted `\ torchrun` is one escaped word
        text = _CONTINUATION.sub(" ", out.decode("utf-8", errors="replace"))
        return " ".join(text.split()) + " "

    def _migrated(self, word) -> str:
        """The word's text (a ``syntax.Arg``) with the other rules' edits inside its
        literal pieces applied."""
        edits = [e for e in self.file.recorder.edits if e.rule != self.id]
        out = bytearray()
        for piece in word.pieces:
            if piece.start is None:
                out += piece.text
                continue
            start, end = piece.start, piece.start + len(piece.text)
            cursor = start
            for edit in sorted((e for e in edits if start <= e.start and e.end <= end), key=lambda e: (e.start, e.end)):
                if edit.start < cursor:
                    continue  # overlapping edits: the engine applies only the first
                out += piece.text[cursor - start:edit.start - start] + edit.new
                cursor = edit.end
            out += piece.text[cursor - start:]
        return out.decode("utf-8", errors="replace")
