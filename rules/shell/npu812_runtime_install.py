"""NPU812: a Dockerfile that installs torch itself installs ``npu-runtime==X`` with it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.shell import syntax
from npu_migrate.shell.rule import Example, ShellRule
from npu_migrate.tables.packages import normalise

from ._pip import PIP_VALUE_OPTIONS, distribution, pip_words

if TYPE_CHECKING:
    from tree_sitter import Node

#: The Dockerfile already names npu-runtime, or installs what declares it: a
#: requirements file (``-r``), the project itself (``pip install .``, ``-e .[dev]``) or a
#: conda environment file (NPU854 and NPU862 declare npu-runtime there).
_DECLARED_ELSEWHERE = re.compile(
    rb"npu[-_.]runtime"
    rb"|\binstall\b(?:[^\n&|;]|\\\n)*?\s(?:-r|--requirement)(?:\s+|=)\S"
    rb"|\binstall\b(?:[^\n&|;]|\\\n)*?\s(?:-e\s+|--editable\s+)?\.(?:\[[^\]\s]*\])?(?=\s|$|;|&|\|)"
    rb"|\benv\s+(?:create|update)\b",
    re.IGNORECASE | re.MULTILINE,
)
#: pip options after which PyPI is not where pip looks (npu-runtime is on PyPI).
_INDEX_OPTIONS = ("-i", "--index-url", "--no-index")
#: conda options that install into another environment than the one pip installs into.
_CONDA_ELSEWHERE = ("-n", "--name", "-p", "--prefix")
_CONDA_TORCH = re.compile(r"(?:pytorch|torch)(?:[=<>!].*)?")
#: Where ``&& pip install ...`` can follow the command without changing what runs.
_CHAINABLE_PARENTS = {"program", "list"}


class RuntimeInstall(ShellRule):
    id = "NPU812"
    impact = "blocking"
    name = "shell-runtime-install"
    summary = "A Dockerfile that installs torch inline installs `npu-runtime==X` with it when the migrated code imports npu_runtime"
    triggers = (b"install",)
    rationale = """
NPU701 writes `import npu_runtime` into training entry points, and NPU854 /
NPU862 declare `npu-runtime==X` in the repository's dependency files. A
Dockerfile that installs the repository's requirements (`pip install -r ...`),
the repository itself (`pip install .`) or a conda environment file gets
npu-runtime through those files. A Dockerfile that installs torch inline
(`RUN pip install torch==2.1.0 torchvision`, `RUN conda install pytorch ...`)
and nothing else is the only place that says what the image holds; the image
would start the migrated code without npu_runtime. So, on the same command that
NPU808 asks to add torch-npu to:

* `pip install ... torch ...`: ` npu-runtime==X` is added as the command's last
  requirement (npu-runtime requires no torch, so it cannot change the torch pip
  picks);
* the same with `--index-url` / `-i` / `--no-index` (PyPI is not searched), or
  `conda install pytorch ...` (npu-runtime is not on conda): ` && pip install
  npu-runtime==X` follows the command (the same pip program for pip; `pip` for
  conda), where the command stands at the top of the `RUN` or in an `&&`/`||`
  list; anywhere else (a pipeline, a subshell, `conda install -n env`) a
  finding says what to add.

Only in Dockerfiles, and only when the code of the run imports npu_runtime and
the runtime is not vendored: the rule runs in the runner's second pass
(`npu_migrate/pipeline/declared.py`); shell scripts are migrated in the first, before
that is known. A Dockerfile that already names npu-runtime is left alone.
"""
    examples = (
        # the code of the example imports no npu_runtime: nothing to add
        Example("pip install torch==2.1.0 torch-npu==2.1.0.post3 numpy\n"),
    )

    def visit_command(self, node: Node) -> None:
        requirement = self.file.facts.runtime_requirement
        if requirement is None or _DECLARED_ELSEWHERE.search(self.file.data):
            return
        words = syntax.command_args(node)
        if not words:
            return
        pip = pip_words(words)
        if pip is not None:
            self._pip(node, words, pip, requirement)
        elif syntax.program(words[0]) in ("conda", "mamba", "micromamba") and len(words) > 1 \
                and words[1].text == "install":
            rest = words[2:]
            if any(_CONDA_TORCH.fullmatch(w.text.strip("\"'")) for w in rest):
                chainable = not any(w.text.split("=", 1)[0] in _CONDA_ELSEWHERE for w in rest)
                self._chain(node, "pip install", requirement, "npu-runtime is not on conda", chainable)

    def _pip(self, node: Node, words: list[syntax.Arg], pip: list[syntax.Arg], requirement: str) -> None:
        torch = False
        index = False
        skip = False
        for word in pip:
            text = word.text
            if skip:
                skip = False
                continue
            if text.startswith("-"):
                option = text.split("=", 1)[0]
                index = index or option in _INDEX_OPTIONS
                skip = text in PIP_VALUE_OPTIONS
                continue
            found = distribution(text.strip("\"'"))
            if found is not None and normalise(found[0]) == "torch":
                torch = True
        if not torch:
            return
        if not index:
            end = words[-1].node.end_byte
            self.replace(end, end, f" {requirement}",
                         f"add `{requirement}` to this install: the migrated code imports npu_runtime")
            return
        program = b" ".join(w.node.text for w in words[: len(words) - len(pip)]).decode("utf-8", "replace")
        self._chain(node, program, requirement, "this install does not search PyPI, where npu-runtime is", True)

    def _chain(self, node: Node, program: str, requirement: str, why: str, chainable: bool) -> None:
        if chainable and node.parent is not None and node.parent.type in _CHAINABLE_PARENTS:
            self.replace(node.end_byte, node.end_byte, f" && {program} {requirement}",
                         f"install `{requirement}` after torch ({why}): the migrated code imports npu_runtime")
            return
        self.report(node, f"the migrated code imports npu_runtime, and this image installs torch without npu-runtime "
                          f"({why})", f"add `RUN pip install {requirement}` after this install")
