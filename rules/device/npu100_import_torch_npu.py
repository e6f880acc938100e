"""NPU100: a guarded ``import torch_npu`` where the migrated file uses an NPU API."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import call_arg, last_name, string_value
from npu_migrate.python.imports import NPU_IS_CUDA, guard_text
from npu_migrate.python.npu_aware import NPU_WORD, npu_mentions
from npu_migrate.python.rule import Example, Rule

#: A device value only torch_npu makes valid: ``npu``, ``npu:0``.
_NPU_DEVICE = re.compile(r"npu(?::\d+)?")
#: Keywords whose string value is a device.
_DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_type"})
_BACKEND_CALLS = frozenset({"torch.distributed.init_process_group", "torch.distributed.new_group"})
#: uses that only name the NPU in a string (a device, the backend), not its API
_NAMED_ONLY = ("the device ", 'the "hccl" backend')


def _uses_npu_api(ctx, node: cst.CSTNode) -> bool:
    """``node`` reads ``torch.npu...`` or calls ``.npu()`` (needs torch_npu to run)."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            nonlocal found
            name = ctx.qualified_name(attribute)
            found = found or attribute.attr.value in ("npu", "is_npu") or bool(name and name.startswith("torch.npu"))
            return not found

    node.visit(_Find())
    return found


class ImportTorchNpu(Rule):
    id = "NPU100"
    name = "import-torch-npu"
    summary = "Add a guarded `import torch_npu` after the file's torch imports when the migrated file uses an NPU API"
    triggers = ("npu", "is_npu", "hccl", "torch_npu")
    runs_with_other_rules = True
    rationale = """
`torch.npu`, the `npu` device type, `Tensor.npu()` and the `hccl` backend only
exist once `torch_npu` has been imported. The import is added to files that this
run changes in a way that needs it (never to a file that is otherwise untouched,
unlike the vendor tool, which adds it everywhere), and to files that already use
one of those APIs without importing torch_npu (`torch.npu.X`, `.npu()`,
`.is_npu`, `torch.device("npu")`, `.to("npu:0")`, `device="npu"`, the `hccl`
backend), so `--check` fails on them. Code that only runs on the NPU (the
branch of a test that names it, `if device.type == "npu":`, the right side of
`device.type == "npu" and torch.npu.X()`, a function or class named for the NPU,
a `try` block) is how libraries use torch_npu after importing it in one central
place: it does not count. A test's own `torch.npu.is_available()` runs
everywhere, so it does.

How it is written, in every file (entry points, scripts and library modules
alike, so the answer never depends on which files a run was given):

    try:
        import torch_npu  # noqa: F401
    except ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before
        torch.npu = torch.cuda

A migrated repository still imports, and runs its CPU path (`--device cpu`),
where torch_npu is not installed: teams develop on CPU machines and train on
Ascend. The `except` body binds what the NPU names the file uses meant before the
migration on that machine: `torch.npu = torch.cuda` (`torch.npu.is_available()`
False, `torch.npu.manual_seed()` a no-op), `torch.Tensor.is_npu =
torch.Tensor.is_cuda` where it tests `x.is_npu`, and
`torch.utils.rename_privateuse1_backend("npu")` where it has torch parse `"npu"`
(`torch.device("npu")`, `torch.is_autocast_enabled("npu")`), and
`torch.npu.get_amp_supported_dtype = list` where it enters `torch.autocast("npu")`
(no AMP dtype: the region runs without autocast, as the CUDA one did there); a file
that imports torch only through `from torch... import` binds it first with `import
torch`; a file that imports `torch.npu` as a module below its top-level imports
(`from torch.npu import is_available` in a `try`) gets `import sys` and
`sys.modules["torch.npu"] = torch.npu = torch.cuda`; a module whose every binding of
torch is a plain `import torch` inside functions (a CLI that imports torch only where
it needs it, so that it starts fast: oumi's, held-out round 25) gets the guard right
after each of those imports, so torch_npu, which imports torch, comes exactly when
torch does; a file that binds torch otherwise only in functions or in a `try` of its
own gets these lines under `try: import torch` / `except ModuleNotFoundError: pass` /
`else:` at the top, so it still imports without torch; else it is `pass`. Only a *missing* torch_npu is
caught: one that is installed but cannot load (CANN not set up on an Ascend
node) fails loudly instead of training on the CPU. The import is used only for its side effect, so linters call it unused
and `ruff --fix` (F401) would delete it; the `noqa` keeps it, and is left out
where the file uses the name `torch_npu` itself (ruff's RUF100 would call it
unused). A top-level `import torch.npu as tc` / `from torch.npu import ...` in
the same import run needs torch_npu at import time: it moves into the `try`
body (written `from torch import npu as tc`, which isort sorts after `import
torch_npu`), and the `except` body binds the name to what it meant before the
migration (`from torch import cuda as tc`), so `import utils` keeps working
without torch_npu.

Where: right after the run of top-level imports that holds the file's first
torch import, with a blank line above it, so it never splits an import block
(isort's and ruff's I001 see the same blocks as before); in a file that imports
torch only inside functions, after its leading imports.

A file that imports torch_npu in a guard of its own that goes on without it
(`try: import torch_npu` / `except: torch_npu = None`, or under an `if`) and
leaves `torch.npu` unbound gets the tool's guard as well, above its own, where the
migrated code uses an NPU name that needs a stand-in on the CPU path (a
`torch.npu.X` the migration wrote outside the project's NPU branch): it binds the
stand-ins and changes nothing the project's guard decides (`torch_npu` is still
`None` there). A project guard that ends in `raise` needs nothing.

What the guard does not do: code that calls `torch.npu.X` on the CPU path
(outside a branch that chose the NPU) needs torch_npu; the rules that write
`torch.npu` decide where that is right.

Rules mark each of their fixes as needing torch_npu or not (`map_location="cpu"`
does not). Ignore this rule (`--ignore NPU100`) if your project imports
torch_npu in one central place.
"""
    examples = (
        Example(
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\nx = torch.zeros(2).cuda()\n",
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n\n"
            + guard_text()
            + "\nx = torch.zeros(2).npu()\n",
            also=("NPU103",),
        ),
        Example(
            "import torch\n\ntorch.npu.set_device(local_rank)\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(NPU_IS_CUDA,)) +
                "\n"
                "torch.npu.set_device(local_rank)\n"
            ),
        ),
        Example(
            "import torch\nif is_torch_npu_available():\n    torch.npu.set_device(local_rank)\n",
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.uses: list[tuple[str, str | None]] = []  # (what, receiver of an `.is_npu` read)
        self.own_is_npu: set[str] = set()  # receivers that assign their own `.is_npu`

    def _use(self, node: cst.CSTNode, what: str, receiver: str | None = None) -> None:
        if not self._library_guarded(node):
            self.uses.append((what, receiver))

    def _library_guarded(self, node: cst.CSTNode) -> bool:
        """Code that only runs on the NPU: the branch of a test that names the NPU
        (`if device.type == "npu":`, `if is_torch_npu_available():`), the right side of
        an `and` whose left side names it without using the API
        (`device.type == "npu" and torch.npu.is_available()`), a function or class
        named for the NPU, a `try` block. A test's own `torch.npu.is_available()`
        is not guarded: it runs everywhere."""
        ctx = self.ctx
        child = node
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.IfExp)) and child is not ancestor.test and npu_mentions(ctx, ancestor.test)[0]:
                return True
            if (
                isinstance(ancestor, cst.BooleanOperation)
                and isinstance(ancestor.operator, cst.And)
                and child is ancestor.right
                and npu_mentions(ctx, ancestor.left)[0]
                and not _uses_npu_api(ctx, ancestor.left)
            ):
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)) and NPU_WORD.search(ancestor.name.value):
                return True
            if isinstance(ancestor, (cst.Try, cst.TryStar)) and child is ancestor.body:
                return True
            child = ancestor
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        name = self.ctx.use_name(node)
        if name is not None and (name == "torch.npu" or name.startswith("torch.npu.")):
            self._use(node, f"`{name}`")
        elif node.attr.value == "is_npu" and name is None:
            receiver = self.ctx.module.code_for_node(node.value)
            parent = self.ctx.parent(node)
            if isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
                self.own_is_npu.add(receiver)  # `self.is_npu = ...`: a flag of the project's own
            else:
                self._use(node, "`.is_npu`", receiver)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "npu":
            self._use(node, "`.npu()`")
        qualified = self.ctx.qualified_name(func)
        device = call_arg(node, None, 0) if qualified == "torch.device" or last_name(func) == "to" else None
        for arg in [device, *(a for a in node.args if a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS)]:
            value = string_value(arg.value) if arg is not None else None
            if value is not None and _NPU_DEVICE.fullmatch(value):
                self._use(node, f'the device "{value}"')  # (the arguments have no parents yet)
        if qualified in _BACKEND_CALLS:
            backend = call_arg(node, "backend", 0)
            if backend is not None and (string_value(backend.value) or "").lower() == "hccl":
                self._use(node, 'the "hccl" backend')

    def leave_file(self) -> None:
        uses = [what for what, receiver in self.uses if receiver is None or receiver not in self.own_is_npu]
        if not self.ctx.imports.imports_module("torch"):
            # A file that imports no torch only names the device or the backend (NPU104 and
            # NPU201 add no import there: the code that uses the value imports torch); asking
            # for the import on a second run would make the migration change its own output.
            uses = [what for what in uses if not what.startswith(_NAMED_ONLY)]
        if uses and not self.ctx.imports.imports_module("torch_npu"):
            self.ctx.uses_npu_unimported = uses[0]
