"""NPU966: a Megatron-LM entry script gets ``import mindspeed.megatron_adaptor`` after ``import torch``."""

from __future__ import annotations

import os

import libcst as cst

from npu_migrate.python.cst_util import is_main_guard
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.unsupported._common import imported_names

ADAPTOR = "mindspeed.megatron_adaptor"
_WHY = ("MindSpeed's README: \"在`import torch`下新增一行：`import mindspeed.megatron_adaptor`\" (Ascend/MindSpeed, "
        "README.md, quick start for pretrain_gpt.py)")


class MindSpeedAdaptor(Rule):
    id = "NPU966"
    name = "mindspeed-adaptor"
    impact = "blocking"
    summary = "Add `import mindspeed.megatron_adaptor` right after `import torch` in Megatron-LM entry scripts"
    triggers = (("megatron", "__main__"),)
    whole_file = True
    rationale = f"""
Megatron-LM runs on Ascend through MindSpeed (Ascend/MindSpeed, "MindSpeed Core"):
its adaptor patches Megatron's CUDA-only pieces (fused kernels, Transformer Engine
layers, flash attention, the device and the backend) with NPU implementations when
it is imported. MindSpeed's README gives the one change an entry script needs:
{_WHY}. So a script that imports `megatron` at module level and runs as a program
(`if __name__ == "__main__":`, as `pretrain_gpt.py`) gets that line right after its
first module-level `import torch` (before it, if the script imports megatron
without importing torch first, since the adaptor must patch megatron before use).
When the script imports one of the project's own modules before its first megatron
import and before `import torch` (Megatron-Bridge's `scripts/training/run_recipe.py`
imports `recipe_runner`, which imports `megatron.bridge`), the line goes before that
import: otherwise megatron would already be imported when the adaptor runs.
A file that already imports mindspeed is left alone; library modules of the
project (no main guard) are not changed: the entry script's import patches them.
A project whose `megatron` package is its own (a `megatron/` folder without
Megatron-LM's `megatron/core`: gpt-neox's fork), or a vendored Megatron-LM older than
core 0.6 (its `megatron/training.py` is a module, not the later package:
Megatron-DeepSpeed's, megatron-core 0.2.0), gets a finding instead: the adaptor patches
Megatron-LM's modules, from the releases a MindSpeed branch covers (core 0.6 on).

MindSpeed is installed from source (`git clone https://gitcode.com/Ascend/MindSpeed.git`,
the branch matching the Megatron-LM release, e.g. Megatron `core_v0.12.1`, then
`pip install -e MindSpeed`; its `docs/zh/user-guide/install_guide.md`), so no
requirement is written for it; NPU967 reports the launch options to review.
"""
    examples = (
        Example(
            "import torch\nfrom megatron.training import pretrain\n\nif __name__ == \"__main__\":\n    pretrain()\n",
            "import torch\nimport mindspeed.megatron_adaptor\nfrom megatron.training import pretrain\n\n"
            "if __name__ == \"__main__\":\n    pretrain()\n",
        ),
        Example("import torch\nfrom megatron.core import mpu\n\ndef helper():\n    return mpu\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._torch: cst.SimpleStatementLine | None = None
        self._megatron: cst.SimpleStatementLine | None = None
        #: the first import of a module of this project before any megatron import (it may
        #: import megatron itself: Megatron-Bridge's run_recipe.py imports recipe_runner first)
        self._local: cst.SimpleStatementLine | None = None
        self._mindspeed = False
        self._main = False

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:
            if is_main_guard(statement):
                self._main = True
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not isinstance(small, (cst.Import, cst.ImportFrom)):
                    continue
                names = imported_names(small)
                if any(n == "mindspeed" or n.startswith("mindspeed.") for n in names):
                    self._mindspeed = True
                if self._torch is None and self._megatron is None and isinstance(small, cst.Import) and "torch" in names:
                    self._torch = statement
                if self._megatron is None and any(n == "megatron" or n.startswith("megatron.") for n in names):
                    self._megatron = statement
                if self._megatron is None and self._local is None and any(
                        self.ctx.facts.is_project_module(self.ctx.path, n) for n in names if n and n[0] != "."):
                    self._local = statement
        # imports inside try/if blocks (``try: import mindspeed.megatron_adaptor``) count as present
        if "mindspeed" in self.ctx.text and any(
            v == "mindspeed" or v.startswith("mindspeed.") for v in self.ctx.imports.bindings.values()
        ):
            self._mindspeed = True

    def leave_file(self) -> None:
        if self._mindspeed or not self._main or self._megatron is None:
            return
        own = _own_megatron(self.ctx.path)
        if own is not None:
            # gpt-neox's `megatron/` is its own fork (no `megatron/core`): MindSpeed's adaptor
            # patches Megatron-LM's modules, which this project does not have
            self.report(self._megatron, f"`megatron` here is this project's own package ({own}): MindSpeed's "
                        "adaptor patches Megatron-LM from core 0.6 on only; nothing added",
                        "port this project's CUDA-only pieces (fused kernels, apex, flash-attn) by hand or with "
                        "the other findings; MindSpeed does not apply")
            return
        adaptor = cst.parse_statement(f"import {ADAPTOR}\n")
        body = self.ctx.module.body
        if self._local is not None and (self._torch is None or _index(body, self._local) < _index(body, self._torch)):
            self.insert_before(self._local, [adaptor], f"add `import {ADAPTOR}` before the first import of this "
                               f"project's own modules, which may import megatron: {_WHY}", first=True)
        elif self._torch is not None:
            self.insert_after(self._torch, [adaptor], f"add `import {ADAPTOR}` after `import torch`: {_WHY}",
                              first=True)
        else:
            self.insert_before(self._megatron, [adaptor], f"add `import {ADAPTOR}` before the first megatron import: "
                               f"{_WHY}", first=True)


def _own_megatron(path: str) -> str | None:
    """The project's own ``megatron`` package (a folder with ``__init__.py`` beside the
    script or in a folder above it, up to the project root) when it is not Megatron-LM
    (which has ``megatron/core``); None otherwise."""
    from npu_migrate.pipeline.config import project_root

    root = project_root(path)
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        package = os.path.join(folder, "megatron")
        if os.path.isfile(os.path.join(package, "__init__.py")):
            shown = os.path.relpath(package, root).replace(os.sep, "/") + "/"
            if not os.path.isdir(os.path.join(package, "core")):
                return f"{shown}, without Megatron-LM's `megatron/core`"
            if os.path.isfile(os.path.join(package, "training.py")):
                # Megatron-DeepSpeed's vendored Megatron (megatron-core 0.2.0): `megatron/training.py`
                # is a module there; Megatron-LM made it the `megatron/training/` package in core
                # 0.6, the oldest release a MindSpeed branch patches (held-out audit of issue 36)
                return f"{shown}, a Megatron-LM older than core 0.6 (`megatron/training.py` is a module)"
            return None
        if folder == root or os.path.dirname(folder) == folder:
            return None
        folder = os.path.dirname(folder)


def _index(body, statement) -> int:
    return next((i for i, s in enumerate(body) if s is statement), len(body))
