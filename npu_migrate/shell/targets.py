"""What a launch command runs, and whether its options can reach torch.

A launcher's ``--device cuda`` reaches torch only through the script it launches.
Where that script is not in the project (a stale launcher: Medusa's
``train_vicuna_7b.sh`` runs ``medusa/train/train.py``, which the repository no longer
has), nothing the tool can see reads the option, so what the rules would rewrite in
that command is reported instead (held-out rounds 15 and 17: 9 needless hunks). Where
the script runs under torch_npu's ``transfer_to_npu`` (it imports, at any depth, the
project's module that imports it: Open-Sora-Plan's ``examples/rec_video.py``), torch_npu
maps ``cuda`` and ``nccl`` at run time, so the device and backend values stay as
written and are reported, as in the script itself (NPU010). Where the script cannot be
imported on Ascend (:meth:`ProjectFacts.module_cannot_import`: it imports flash-attn at
module level, or a module of the project that does), nothing the command sets reaches
torch on NPU: its edits are reported too.

The script is the command's first word that ends in ``.py``, written without
expansions; it is found when some Python file of the project ends with that path (the
``../`` and ``./`` in front dropped), whatever the directory the launcher is run from.
Anything else (``python -m pkg``, ``$ROOT/train.py``, a project whose Python files the
run does not know) is left to the rules as before.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_migrate.shell import syntax

if TYPE_CHECKING:
    from tree_sitter import Node

    from npu_migrate.pipeline.facts import ProjectFacts

#: The rules whose values torch_npu's ``transfer_to_npu`` maps at run time.
PATCHED_RULES = frozenset({"NPU803", "NPU804"})


@dataclass(frozen=True)
class LeftLaunch:
    #: where the command starts (its findings go on its statement)
    start: int
    #: None: every rule's edit in the command is left; else only these rules' edits.
    rules: frozenset[str] | None
    why: str
    #: What the user does about it; ``{change}`` says what the rule would have done.
    suggestion: str


def launched_script(command: Node, facts: ProjectFacts) -> tuple[str, tuple[str, ...] | None] | None:
    """``(the script as written, the project's files it may be)`` for a launch command
    (None for the files when the project has no such file); None when the tool cannot
    tell (no ``.py`` word, an expansion, an absolute path, a project without Python files)."""
    if not facts.local_modules:
        return None
    launch = syntax.launch_args(command)
    if launch is None:
        return None
    script = next((w for w in launch[1] if w.static and w.text.endswith(".py") and not w.text.startswith("-")), None)
    if script is None:
        return _launched_module(launch[1], facts)
    written = script.text.strip("\"'")
    if written.startswith(("/", "~")):
        return None  # a path of some machine, not of the project
    return written, facts.module_tails.get(_tail(written))


#: a module name as ``python -m`` takes it
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _launched_module(words: list, facts: ProjectFacts) -> tuple[str, tuple[str, ...] | None] | None:
    """``python -m llava.eval.model_vqa_loader ...``: the project's module a launch runs
    (its file, or its package's ``__main__``), found as a script is (VILA's evaluation
    launchers, held-out round 23: 35 wrong edits pinned NPUs for a module that cannot be
    imported on Ascend). A module that is not the project's (``-m torch.distributed.run``,
    ``-m lm_eval``) is left to the rules, as before."""
    for first, second in itertools.pairwise(words):
        if first.text == "-m" and second.static and _DOTTED.fullmatch(second.text):
            tail = second.text.replace(".", "/")
            for candidate in (tail, f"{tail}/__main__"):
                found = facts.module_tails.get(candidate)
                if found is not None:
                    return f"-m {second.text}", found
            return None
    return None


def not_parsed_by_transformers(command: Node, facts: ProjectFacts) -> str | None:
    """The script ``command`` runs, when it is the project's and none of its candidates
    names ``TrainingArguments`` or ``HfArgumentParser`` (LLM-Shearing's ``inference.py``
    takes its own ``--tf32`` through fire: held-out round 18)."""
    launched = launched_script(command, facts)
    if launched is None or launched[1] is None:
        return None
    written, found = launched
    return None if any(f in facts.hf_argument_files for f in found) else written


def left_launch(command: Node, facts: ProjectFacts) -> LeftLaunch | None:
    """The edits of ``command`` that are left (see the module's docstring), or None."""
    launched = launched_script(command, facts)
    if launched is None:
        return None
    written, found = launched
    if found is None:
        return LeftLaunch(command.start_byte, None,
                          f"`{written}`, the script this command runs, is not in the project, so nothing here is "
                          "known to reach torch",
                          "check which script this command should run; {change} by hand if it runs on Ascend")
    if all(os.path.abspath(f) in facts.quiet_files for f in found):
        # VILA's scoring scripts (`CUDA_VISIBLE_DEVICES=0 python llava/eval/eval_pope.py`,
        # held-out round 23): a script without torch, imports that reach it, or processes
        return LeftLaunch(command.start_byte, None,
                          f"`{written}`, the script this command runs, uses no torch (nor imports anything that does, "
                          "nor starts a process), so nothing here reaches a device",
                          "nothing to do; {change} if that script comes to use the accelerator")
    blockers = [facts.module_cannot_import(f, os.path.basename(f).removesuffix(".py")) for f in found]
    if all(blockers):
        # the script cannot be imported on Ascend (it imports flash-attn at module level, or a
        # module of the project that does): it runs nowhere but on CUDA until that import is
        # ported, so its launcher's settings stay CUDA's (EasyContext's train.py, round 20)
        return LeftLaunch(command.start_byte, None,
                          f"`{written}`, the script this command runs, cannot be imported on Ascend (its module-level "
                          "imports lead to a package with no Ascend build), so nothing here reaches torch on NPU",
                          "port that script's imports first, then run npu-migrate again; {change} then")
    patchers = {facts.patched_by(f) for f in found}
    if None in patchers:
        return None
    return LeftLaunch(command.start_byte, PATCHED_RULES,
                      f"`{written}` runs under torch_npu's transfer_to_npu (it imports "
                      f"`{os.path.basename(min(patchers))}`), which maps this value to the NPU at run time",
                      "nothing to change while that module imports transfer_to_npu; {change} if it stops")


def _tail(written: str) -> str:
    """``a/b/train`` for ``./a/b/train.py`` and ``../../a/b/train.py``."""
    path = posixpath.normpath(written.removesuffix(".py"))
    while path.startswith("../"):
        path = path[3:]
    return path.removeprefix("./")


#: NCCL settings that tune one NVIDIA fabric (NVLink SHARP, GPUDirect RDMA, InfiniBand
#: HCAs and queue pairs, CollNet, CTAs, NCCL's plugins): HCCL has none of them.
_FABRIC_SETTING = re.compile(
    r"NCCL_(?:NVLS|MNNVL|COLLNET|NET_GDR|IB_HCA|IB_QPS|IB_SPLIT|IB_ADAPTIVE|IB_PCI|MIN_CTAS|MAX_CTAS|CUMEM|"
    r"WORK_FIFO|NET_PLUGIN|TUNER_PLUGIN|P2P_NVL)\w*")
#: how many distinct ones make a launcher one cluster's
FABRIC_SETTINGS = 3


def nvidia_cluster(root: Node) -> LeftLaunch | None:
    """A launcher tuned for one NVIDIA cluster: it sets ``FABRIC_SETTINGS`` or more NCCL
    fabric settings (dolomite-engine's Blue Vela and CoreWeave GB200 jobs: mlx5 HCAs,
    NVLS, GDR over C2C, held-out round 22). Its other CUDA names go with that cluster
    (LSF and Slurm set CUDA_VISIBLE_DEVICES there; ``TORCH_NCCL_*`` tune its NCCL): every
    edit of such a script is left and reported, and the Ascend launcher is written anew."""
    found: dict[str, int] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "variable_assignment":
            name = node.child_by_field_name("name")
            text = name.text.decode("utf-8", "replace") if name is not None and name.text else ""
            if _FABRIC_SETTING.fullmatch(text):
                found.setdefault(text, node.start_byte)
        stack.extend(node.children)
    if len(found) < FABRIC_SETTINGS:
        return None
    shown = ", ".join(sorted(found)[:3])
    return LeftLaunch(min(found.values()), None,
                      f"this launcher is tuned for one NVIDIA cluster ({shown}...: NCCL fabric settings HCCL does not "
                      "have), and its CUDA settings go with that cluster",
                      "write the Ascend cluster's launcher from this one (`npu-migrate launch` generates one); "
                      "{change} there")

