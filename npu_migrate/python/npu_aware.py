"""Which if/elif chains (and conditional expressions) already handle NPU (NPU010).

Libraries that support Ascend branch on it: ``if is_torch_npu_available(): ...
elif torch.cuda.is_available(): ...``. Rewriting the CUDA branch would turn it
into a second NPU branch, so the engine leaves such chains alone and reports them
under NPU010.

The tool's own output must never look like that, or a second run over migrated
code would swallow the findings it still has to report (``if device.type ==
'cuda': ... elif ...: nn.DataParallel(...)`` becomes ``if device.type == 'npu'``,
and the DataParallel finding would turn into NPU010). So a test counts as an NPU
branch only in one of two ways:

* it names the NPU in a way no rewrite writes: an identifier such as
  ``is_torch_npu_available``, ``torch_npu``, ``use_npu``, ``IS_NPU``, a string
  such as ``hasattr(torch, "npu")`` or ``find_spec("torch_npu")``;
* it names the NPU the way a rewrite would (``torch.npu.X``, ``x.is_npu``,
  ``x.npu()``, a comparison with ``"npu"``), and another branch of the same
  chain still holds CUDA code that the tool would rewrite (a pending edit).
  Migrated code holds none (a second run changes nothing), so an NPU test the
  tool wrote never makes its chain NPU-aware.

``npu_runtime``, the runtime the rewrites call (``if npu_runtime.is_main_process():``
around a checkpoint save), does not name the NPU either. ``input`` and ``inputs``
do not name the NPU: only ``npu`` (or ``hccl``) at the
start of a word part counts (``npu``, ``torch_npu``, ``NPU_VISIBLE``,
``is_npu_available``, ``is_hccl_backend``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import string_value

#: ``npu`` (or ``hccl``, its collective library) at the start of a word or after
#: ``_``/a non-letter: not ``input``.
NPU_WORD = re.compile(r"(?<![a-z])(?:npu|hccl)", re.IGNORECASE)
#: Attributes the rewrites produce (``torch.npu``, ``x.npu()``, ``x.is_npu``,
#: ``dist.is_hccl_available``).
_REWRITE_ATTRIBUTES = frozenset({"npu", "is_npu", "is_hccl_available"})
#: Modules the rewrites call (``npu_runtime.is_main_process()``): not a test of the NPU.
_TOOL_MODULES = frozenset({"npu_runtime"})
#: A value the rewrites produce: ``npu``, ``npu:0``, ``npu:{rank}``, ``npu:%d``, ``hccl``.
_NPU_DEVICE = re.compile(r"npu(?::.*)?|hccl", re.DOTALL)


def mentions_npu(text: str) -> bool:
    return NPU_WORD.search(text) is not None


def _string_text(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.FormattedString):
        return "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
    return string_value(node)


def _in_comparison(ctx: FileContext, node: cst.CSTNode) -> bool:
    """A string compared with something (``== "npu"``, ``in ("npu", "cuda")``,
    ``.startswith("npu")``): where device-string rewrites put their ``"npu"``."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return True
        if isinstance(parent, cst.Call):
            func = parent.func
            return isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith")
        if not isinstance(parent, (cst.Element, cst.Tuple, cst.List, cst.Set, cst.Arg, cst.ConcatenatedString)):
            return False
    return False


def npu_mentions(ctx: FileContext, test: cst.CSTNode) -> tuple[bool, bool]:
    """``(any, human)``: whether ``test`` names the NPU at all, and whether it does so
    in a way no rewrite of the tool produces (see the module docstring)."""
    found = human = False

    class _Scan(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found, human
            if node.value in _TOOL_MODULES:
                return  # `if npu_runtime.is_main_process():` is the tool's, and no device test
            if mentions_npu(node.value):
                found = True
                parent = ctx.parent(node)
                rewritten = isinstance(parent, cst.Attribute) and parent.attr is node and node.value in _REWRITE_ATTRIBUTES
                human = human or not rewritten

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            self._string(node)

        def visit_FormattedString(self, node: cst.FormattedString) -> None:
            self._string(node)

        def _string(self, node: cst.CSTNode) -> None:
            nonlocal found, human
            text = _string_text(node)
            if text is None or not mentions_npu(text):
                return
            found = True
            human = human or not (_NPU_DEVICE.fullmatch(text) and _in_comparison(ctx, node))

    test.visit(_Scan())
    return found, human


def _branches(ctx: FileContext, top: cst.If) -> Iterator[tuple[cst.CSTNode | None, cst.CSTNode]]:
    """``(test, body)`` of each branch of an if/elif/else chain (``None`` test: else)."""
    branch: cst.CSTNode | None = top
    while isinstance(branch, cst.If):
        yield branch.test, branch.body
        branch = branch.orelse
    if isinstance(branch, cst.Else):
        yield None, branch.body


def _contains(node: cst.CSTNode | None, marked: Collection[cst.CSTNode]) -> bool:
    return node is not None and node in marked


def aware_chain(ctx: FileContext, node: cst.CSTNode, edited: Collection[cst.CSTNode]) -> cst.CSTNode | None:
    """The outermost if/elif chain (or conditional expression) around ``node`` that
    already handles the NPU, if any. ``edited`` holds every node that is, or
    contains, the target of a pending edit."""
    found = None
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.IfExp):
            named, human = npu_mentions(ctx, ancestor.test)
            if named and (human or _contains(ancestor.body, edited) or _contains(ancestor.orelse, edited)):
                found = ancestor
        elif isinstance(ancestor, cst.If):
            top = ancestor
            while isinstance(ctx.parent(top), cst.If) and ctx.parent(top).orelse is top:
                top = ctx.parent(top)
            branches = list(_branches(ctx, top))
            for index, (test, _) in enumerate(branches):
                if test is None:
                    continue
                named, human = npu_mentions(ctx, test)
                if not named:
                    continue
                others = [part for i, branch in enumerate(branches) if i != index for part in branch]
                if human or any(_contains(part, edited) for part in others):
                    found = top
                    break
    return found


def edited_nodes(ctx: FileContext, targets: Collection[cst.CSTNode]) -> set[cst.CSTNode]:
    """Every target and all of its ancestors."""
    marked: set[cst.CSTNode] = set()
    for target in targets:
        if target in marked:
            continue
        marked.add(target)
        for ancestor in ctx.ancestors(target):
            if ancestor in marked:
                break
            marked.add(ancestor)
    return marked
