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
  such as ``hasattr(torch, "npu")`` or ``find_spec("torch_npu")``, or torch's
  PrivateUse1 slot that torch_npu fills (``torch._C._get_privateuse1_backend_name()``);
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

import ast
import bisect
import re
from collections.abc import Collection, Iterator, Sequence

import libcst as cst
import libcst.helpers

from npu_migrate.pipeline.cuda_builds import dotted_name as _ast_dotted
from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import string_value
from npu_migrate.python.cuda_only import all_nodes, enclosing_function

#: ``npu`` (or ``hccl``, its collective library) at the start of a word or after
#: ``_``/a non-letter: not ``input``.
NPU_WORD = re.compile(r"(?<![a-z])(?:npu|hccl)", re.IGNORECASE)
#: Names of torch's out-of-tree backend slot, which torch_npu fills (``_get_privateuse1_backend_name``).
_PRIVATEUSE1 = re.compile(r"privateuse1", re.IGNORECASE)
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


def in_comparison(ctx: FileContext, node: cst.CSTNode) -> bool:
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
            if _PRIVATEUSE1.search(node.value) and node.value != "rename_privateuse1_backend":
                # `elif device == torch._C._get_privateuse1_backend_name():` (torch's own
                # pin-memory loop, copied into Open-Sora): the out-of-tree backend, which
                # torch_npu registers as "npu", already has its branch
                found = human = True
                return
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
            human = human or not (_NPU_DEVICE.fullmatch(text) and in_comparison(ctx, node))

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


def _adjacent(ctx: FileContext, top: cst.If, memo: dict | None = None) -> list[cst.If]:
    """``top`` and the ``if`` statements right next to it in the same block: ``if t ==
    'cuda': ...`` followed by ``if t == 'npu': ...`` handles the NPU as an elif would.
    With ``memo`` (one per file), each block's runs of ``if`` statements are found once."""
    block = ctx.parent(top)
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)):
        return [top]
    if memo is None:
        runs = _runs_of_ifs(body)
    else:
        key = ("runs", id(block))
        if key not in memo:
            memo[key] = (block, _runs_of_ifs(body))  # the block kept alive: its id stays its own
        runs = memo[key][1]
    run = runs.get(id(top))
    return [top] if run is None else run


def _runs_of_ifs(body: Sequence[cst.CSTNode]) -> dict[int, list[cst.If]]:
    """id of each ``if`` statement of ``body`` -> the run of adjacent ``if`` statements holding it."""
    runs: dict[int, list[cst.If]] = {}
    current: list[cst.If] = []
    for statement in [*body, None]:
        if isinstance(statement, cst.If):
            current.append(statement)
            continue
        for member in current:
            runs[id(member)] = current
        current = []
    return runs


def _contains(node: cst.CSTNode | None, marked: Collection[cst.CSTNode]) -> bool:
    return node is not None and node in marked


def aware_chain(ctx: FileContext, node: cst.CSTNode, edited: Collection[cst.CSTNode],
                memo: dict | None = None) -> tuple[cst.CSTNode, cst.CSTNode | None] | None:
    """The outermost if/elif chain (or conditional expression) around ``node`` that
    already handles the NPU, if any, with the test of it that names the NPU (for the
    reviewer; None where only a value does: ``torch.cuda if c else torch.npu``).
    ``edited`` holds every node that is, or contains, the target of a pending edit.
    ``memo`` (one per file and ``edited``): what each run of adjacent ``if`` statements
    says is found once, not again for each node inside it (12,000 adjacent ``if
    torch.cuda.is_available():`` blocks took minutes, each looking at all the others)."""
    found: tuple[cst.CSTNode, cst.CSTNode | None] | None = None
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.IfExp):
            # `a if x else (b if y else c)` is one chain, as if/elif is
            top = ancestor
            while isinstance(ctx.parent(top), cst.IfExp) and ctx.parent(top).orelse is top:
                top = ctx.parent(top)
            parts: list[tuple[cst.CSTNode, cst.CSTNode]] = []
            branch: cst.CSTNode = top
            while isinstance(branch, cst.IfExp):
                parts.append((branch.test, branch.body))
                branch = branch.orelse
            rest = branch
            for index, (test, _) in enumerate(parts):
                named, human = npu_mentions(ctx, test)
                if not named:
                    continue
                others = [p for i, pair in enumerate(parts) if i != index for p in pair] + [rest]
                if human or any(_contains(p, edited) for p in others):
                    found = top, test
                    break
            else:
                # `torch.cuda if use_cuda else torch.npu`: a value of the expression is
                # the NPU one while another still holds CUDA code to rewrite
                values = [body for _, body in parts] + [rest]
                for index, value in enumerate(values):
                    if npu_mentions(ctx, value)[0]:
                        others = [v for i, v in enumerate(values) if i != index] + [t for t, _ in parts]
                        if any(_contains(p, edited) for p in others):
                            found = top, None
                            break
        elif isinstance(ancestor, cst.If):
            top = ancestor
            while isinstance(ctx.parent(top), cst.If) and ctx.parent(top).orelse is top:
                top = ctx.parent(top)
            group = _adjacent(ctx, top, memo)
            key = ("chain", id(group[0]))
            verdict = memo.get(key) if memo is not None else None
            if verdict is None:
                verdict = _chain_verdict(ctx, group, edited)
                if memo is not None:
                    memo[key] = verdict
            aware_test, importing = verdict
            if aware_test is not None:
                found = top, aware_test
            else:
                # `if torch.cuda.is_available(): ... else: import torch_npu; device = "npu"`:
                # another branch imports torch_npu itself (the tool only imports at the top)
                holder = {id(a) for a in ctx.ancestors(node)}
                for test, body in importing:
                    if id(body) not in holder:
                        found = top, test
                        break
    return found


def _chain_verdict(ctx: FileContext, group: list[cst.If], edited: Collection[cst.CSTNode]
                   ) -> tuple[cst.CSTNode | None, list[tuple[cst.CSTNode | None, cst.CSTNode]]]:
    """For the branches of a run of adjacent if/elif chains: the first test that names
    the NPU where that makes the chain NPU-aware (a human's test, or another branch holds
    an edit), else None with the branches whose body imports torch_npu itself, in order."""
    branches = [branch for chain in group for branch in _branches(ctx, chain)]
    edited_parts = [sum(1 for part in branch if _contains(part, edited)) for branch in branches]
    total = sum(edited_parts)
    for index, (test, _) in enumerate(branches):
        if test is None:
            continue
        named, human = npu_mentions(ctx, test)
        if not named:
            continue
        if human or total - edited_parts[index] > 0:  # a part of another branch holds an edit
            return test, []
    return None, [(test, body) for test, body in branches if _imports_torch_npu(body)]


def _imports_torch_npu(body: cst.CSTNode) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            nonlocal found
            found = found or any(cst.helpers.get_full_name_for_node(a.name) == "torch_npu" for a in node.names)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    body.visit(_Find())
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


# -- flags that feed an NPU-aware chain ------------------------------------------------
#
# timm's PrefetchLoader computes ``self.is_cuda = device.type == 'cuda' and
# torch.cuda.is_available()`` next to ``self.is_npu = ...``, then branches ``if
# self.is_cuda: torch.cuda.Stream() elif self.is_npu: torch.npu.Stream()``. The chain
# is left alone (above); rewriting the flag's value into an NPU test would send the
# NPU into the CUDA branch, which crashes there. So an assignment whose target is
# tested in an NPU-aware chain is left alone as well. The chain is read from
# CPython's ``ast`` of the whole file (elision may have left its function out).


def _ast_names_npu(test: ast.AST) -> bool:
    """Whether an ``ast`` test names the NPU in any way (``npu``/``hccl`` in a name, an
    attribute or a string: ``self.is_npu``, ``torch.npu.is_available()``, ``== 'npu'``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id not in _TOOL_MODULES and mentions_npu(node.id):
            return True
        if isinstance(node, ast.Attribute) and mentions_npu(node.attr):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and mentions_npu(node.value):
            return True
    return False


def _lines(node: ast.AST) -> tuple[int, int]:
    return node.lineno, getattr(node, "end_lineno", None) or node.lineno


def _chain_parts(statement: ast.If) -> list[tuple[ast.AST | None, list[ast.stmt]]]:
    """``(test, body)`` of an if/elif/else chain, ``elif`` read as a lone nested ``if``."""
    parts: list[tuple[ast.AST | None, list[ast.stmt]]] = []
    node: ast.AST = statement
    while isinstance(node, ast.If):
        parts.append((node.test, node.body))
        orelse = node.orelse
        if len(orelse) == 1 and isinstance(orelse[0], ast.If):
            node = orelse[0]
            continue
        if orelse:
            parts.append((None, orelse))
        break
    return parts


def _groups(scope: ast.AST) -> Iterator[list[tuple[ast.AST | None, list[ast.AST]]]]:
    """Each if/elif chain of ``scope`` together with the ``if`` statements right next to
    it (``if t == 'cuda': ...`` / ``if t == 'npu': ...``), and each conditional expression."""
    for node in ast.walk(scope):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            run: list[ast.If] = []
            for statement in [*block, None]:
                if isinstance(statement, ast.If) and not (field == "orelse" and len(block) == 1 and isinstance(node, ast.If)):
                    run.append(statement)
                    continue
                if run:
                    yield [(test, list(body)) for chain in run for test, body in _chain_parts(chain)]
                    run = []
        if isinstance(node, ast.IfExp):
            group: list[tuple[ast.AST | None, list[ast.AST]]] = []
            branch: ast.AST = node
            while isinstance(branch, ast.IfExp):  # `a if x else b if y else c`
                group.append((branch.test, [branch.body]))
                branch = branch.orelse
            yield [*group, (None, [branch])]


_TRUTH_CALLS = frozenset({"is_available", "is_initialized", "is_bf16_supported", "startswith", "endswith",
                          "isinstance", "hasattr", "bool", "all", "any"})


def _truth_value(node: ast.AST) -> bool:
    """A flag's value: a comparison, ``and``/``or``/``not`` of tests, ``x.is_cuda``,
    ``torch.cuda.is_available()``. Not a device value (``'cuda' if ... else 'cpu'``)."""
    if isinstance(node, (ast.Compare, ast.BoolOp)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr.startswith("is_")
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name in _TRUTH_CALLS or name.startswith("is_")
    return False


def flags_feeding_aware_chains(tree: ast.Module, kept: Collection[int]) -> dict[tuple[int, int], tuple[str, str]]:
    """Line ranges of assignments to a flag (a name, or an attribute such as
    ``self.is_cuda``) that hold a pending edit (a line of ``kept``) and whose flag is
    tested in a chain (or next to ``if`` statements) that tests the NPU:
    range -> (the flag, the chain's test of the NPU, as code)."""
    if not kept:
        return {}
    out: dict[tuple[int, int], tuple[str, str]] = {}
    ordered = sorted(kept)  # a binary search per assignment, not a scan of every kept line (quadratic)
    tested: dict[int, tuple[ast.AST, dict[str, str]]] = {}  # id(scope) -> (scope, flag -> NPU test)
    for node in all_nodes(tree):
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        span = _lines(node)
        at = bisect.bisect_left(ordered, span[0])
        if at == len(ordered) or ordered[at] > span[1]:
            continue
        if not _truth_value(node.value):
            continue  # a device value (`device = 'cuda' if ...`) moved to 'npu' takes the NPU branch: rewrite it
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            flag = _ast_dotted(target)
            if flag is None:
                continue
            scope = tree if "." in flag else enclosing_function(tree, node.lineno)
            if id(scope) not in tested:  # each scope's chains read once, not once per flag in it
                tested[id(scope)] = (scope, _aware_group_tests(scope))
            found = tested[id(scope)][1].get(flag)
            if found is not None:
                out[span] = (flag, found)
                break
    return out


def _aware_group_tests(scope: ast.AST) -> dict[str, str]:
    """Each flag tested in a group (``_groups``) that also tests the NPU -> that test, as
    code, from the first such group; in one pass over the scope (asked per flag, 2,000
    flags read the module 2,000 times). Any NPU test counts here, also one written the
    way a rewrite writes it (``elif self.is_npu:``): the flag itself still holds a
    pending edit, so this is not the tool's own output (a second run has nothing left to
    rewrite in it)."""
    found: dict[str, str] = {}
    for group in _groups(scope):
        tests = [test for test, _ in group if test is not None]
        npu = next((t for t in tests if _ast_names_npu(t)), None)
        if npu is None:
            continue
        used = {_ast_dotted(n) for test in tests for n in ast.walk(test) if isinstance(n, (ast.Name, ast.Attribute))}
        used.discard(None)
        if not used - found.keys():
            continue
        text = " ".join(ast.unparse(npu).split())
        for flag in used:
            found.setdefault(flag, text if len(text) <= 60 else text[:57] + "...")
    return found

