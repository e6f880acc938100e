"""Shared by NPU104 and NPU108: where a ``'cuda'`` string literal is used as a device.

The analysis goes *up* from each literal whose value looks like a CUDA device
(``'cuda'``, ``'cuda:0'``, ``'cuda:%d'``, ``'cuda:{}'``, ``f"cuda:{rank}"``): through
the expressions that only pass a value on (conditional expressions, ``or``,
``'cuda:' + str(i)``, ``'cuda:%d' % i``, ``.format``, lambdas, tuples, dicts) to
the place where the value is consumed, and classifies that place:

* ``REWRITE``: the value is provably a device (``torch.device(...)``, a
  ``device=`` keyword, ``.to(...)``, ``map_location``, the device type of
  ``torch.autocast``, a comparison with ``x.device.type``, a name called
  ``device`` or a name whose uses reach one of those...);
* ``AWARE``: the code already names ``'npu'`` next to it (left alone, silently);
* ``PROSE``: a message (print, logging, exceptions, docstrings): left alone;
* ``MAP_KEY``: a key of a ``map_location`` dict, which names the device a
  checkpoint was *saved* on (still ``'cuda:N'`` for GPU checkpoints): reported;
* ``UNKNOWN``: everything else. NPU108 reports those, so no CUDA device string
  is left behind silently.

Both rules call :func:`classify`, a pure function of the file context, so they
agree without sharing state.
"""

from __future__ import annotations

import re
from enum import Enum

import libcst as cst

from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import last_name, string_value
from npu_migrate.python.rule import Rule
from npu_migrate.tables.devices import DEVICE_WORD, NOT_A_DEVICE

#: 'cuda', 'cuda:0', 'cuda:', 'cuda:%d', 'cuda:{}', 'cuda:{0}', 'cuda:{rank}'
DEVICE_VALUE = re.compile(r"cuda(?::(?:\d+|%[dis]|\{[^{}]*\})?)?")
#: the text before the first replacement field of an f-string: 'cuda' or 'cuda:'
FSTRING_HEAD = re.compile(r"cuda(?::\d*)?")

# One definition of "a name that holds a device" for every front end.
_DEVICE_WORD = DEVICE_WORD
_NOT_A_DEVICE = NOT_A_DEVICE

#: callables whose positional argument at this index is a device or device type
POSITIONAL_DEVICE = {
    "torch.device": 0,
    "torch.autocast": 0,
    "torch.amp.autocast": 0,
    "torch.amp.autocast_mode.autocast": 0,
    "torch.amp.GradScaler": 0,
    "torch.amp.grad_scaler.GradScaler": 0,
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 0,
    "torch.amp.is_autocast_available": 0,
    "torch.amp.autocast_mode.is_autocast_available": 0,
    "torch.get_autocast_dtype": 0,
    "torch.set_autocast_dtype": 0,
    "torch.is_autocast_enabled": 0,
    "torch.set_autocast_enabled": 0,
    "torch.Generator": 0,
    "torch.set_default_device": 0,
    "torch.get_device_module": 0,
    "torch.load": 1,
    "torch.utils.data.DataLoader": -1,  # no positional device; keywords only
}
#: methods whose first positional argument is a device, on any receiver
METHOD_DEVICE = {"to", "cuda", "npu", "to_empty"}
#: string methods that test or take apart a device string when called on one
_PARSING_METHODS = frozenset({
    "startswith", "endswith", "replace", "split", "rsplit", "partition", "rpartition",
    "removeprefix", "lstrip", "strip", "find", "rfind", "index", "count",
})
#: calls whose other arguments are text for people
_PROSE_CALLS = {
    "print", "info", "debug", "warning", "warn", "error", "exception", "critical", "log",
    "write", "echo", "secho", "add_text", "set_description", "set_postfix_str", "rank_zero_info",
    "rank_zero_warn", "print_rank_0", "logging",
}
#: lookups whose default is a device when their key names one
_LOOKUPS = {"get", "pop", "setdefault", "getenv", "getattr", "get_or_default"}


#: ``kinds.append("npu")``, ``kinds += ["npu"]``, ``kinds.extend(("npu", ...))``: code
#: that adds the NPU to a collection of device types itself
_ADDS_NPU = re.compile(r"""(?:\.(?:append|add|insert|extend)\(|\+=\s*)[^\n]*?['"]npu['"]""")

class Verdict(Enum):
    REWRITE = "rewrite"
    AWARE = "aware"
    PROSE = "prose"
    UNKNOWN = "unknown"
    MAP_KEY = "map_key"  # a key of a map_location dict: the device a checkpoint was saved on


def is_device_word(name: str | None) -> bool:
    return bool(name) and bool(_DEVICE_WORD.search(name)) and not _NOT_A_DEVICE.search(name)


def literal_is_device(node: cst.CSTNode) -> bool:
    """A string literal whose value is a CUDA device (or the start of one)."""
    if isinstance(node, cst.FormattedString):
        head = node.parts[0] if node.parts else None
        if not isinstance(head, cst.FormattedStringText):
            return False
        if len(node.parts) == 1:
            return bool(DEVICE_VALUE.fullmatch(head.value))
        return bool(FSTRING_HEAD.fullmatch(head.value))
    if isinstance(node, cst.SimpleString):
        value = string_value(node)
        return value is not None and "b" not in node.prefix.lower() and bool(DEVICE_VALUE.fullmatch(value))
    return False


def swap(node: cst.CSTNode, device: str = "npu") -> cst.CSTNode:
    """``'cuda...'`` -> ``'npu...'`` (or another target's ``device``) in a literal,
    keeping prefix and quotes; a no-op on anything else (so applying it twice is
    harmless)."""
    if isinstance(node, cst.SimpleString):
        head = len(node.prefix) + len(node.quote)
        body = node.value[head:]
        if body.startswith("cuda"):
            return node.with_changes(value=node.value[:head] + device + body[4:])
        return node
    if isinstance(node, cst.FormattedString) and node.parts:
        first = node.parts[0]
        if isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda"):
            new_first = first.with_changes(value=device + first.value[4:])
            return node.with_changes(parts=[new_first, *node.parts[1:]])
    return node


def _strings_in(node: cst.CSTNode) -> list[str]:
    """Values of the plain string literals directly in a tuple/list/set/dict display."""
    out = []
    elements = getattr(node, "elements", ())
    for element in elements:
        for part in (getattr(element, "key", None), getattr(element, "value", None)):
            value = string_value(part)
            if value is not None:
                out.append(value)
    return out


class DeviceAnalysis:
    """Classifies device-looking literals of one file; see the module docstring."""

    MAX_FLOW = 3  # how many `a = b` hops a name may take to reach a device use

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._cache: dict[cst.CSTNode, Verdict] = {}
        self._privateuse1: dict[cst.CSTNode, bool] = {}
        self.reasons: dict[cst.CSTNode, str] = {}
        self._why: str | None = None

    # -- entry point -----------------------------------------------------------------

    def classify(self, literal: cst.CSTNode) -> Verdict:
        verdict = self._cache.get(literal)
        if verdict is None:
            self._why = None
            verdict = self._walk(literal, 0)
            self._cache[literal] = verdict
            if verdict is Verdict.REWRITE and self._why:
                self.reasons[literal] = self._why
        return verdict

    def reason(self, literal: cst.CSTNode) -> str | None:
        """Why :meth:`classify` judged ``literal`` a device (the evidence, for the report)."""
        self.classify(literal)
        return self.reasons.get(literal)

    def _short(self, node: cst.CSTNode) -> str:
        text = " ".join(self.ctx.module.code_for_node(node).split())
        return text if len(text) <= 60 else text[:57] + "..."

    def _rewrite(self, why: str) -> Verdict:
        self._why = why
        return Verdict.REWRITE

    # -- walking up --------------------------------------------------------------------

    def _is_map_location(self, arg: cst.CSTNode | None) -> bool:
        if not isinstance(arg, cst.Arg):
            return False
        if arg.keyword is not None:
            return arg.keyword.value == "map_location"
        call = self.ctx.parent(arg)
        if not isinstance(call, cst.Call) or self.ctx.qualified_name(call.func) != "torch.load":
            return False
        positional = [a for a in call.args if a.keyword is None]
        return arg in positional and positional.index(arg) == 1

    def _walk(self, start: cst.CSTNode, depth: int) -> Verdict:
        dict_key = False

        def finish(verdict: Verdict, consumer: cst.CSTNode | None = None) -> Verdict:
            if dict_key and verdict is Verdict.REWRITE:
                # A key of `map_location={'cuda:0': ...}` names where the checkpoint was
                # *saved*: on a GPU for the checkpoints users bring along. Other dicts keyed
                # by device type (`{'cuda': check, 'xpu': ...}`) change meaning if renamed.
                return Verdict.MAP_KEY if self._is_map_location(consumer) else Verdict.UNKNOWN
            return verdict

        ctx = self.ctx
        node = start
        proven = False  # passed through `x if torch.cuda.is_available() else y`
        while True:
            parent = ctx.parent(node)
            if parent is None:
                return finish(Verdict.UNKNOWN)
            if isinstance(parent, cst.ConcatenatedString):
                node = parent
                continue
            if isinstance(parent, cst.IfExp):
                if node is parent.test:
                    return finish(self._fallback(proven))
                if self._mentions_npu(parent):
                    return finish(Verdict.AWARE)
                proven = proven or self._tests_cuda(parent.test)
                node = parent
                continue
            if isinstance(parent, cst.BooleanOperation):
                node = parent
                continue
            if isinstance(parent, cst.BinaryOperation):
                if node is parent.left and isinstance(parent.operator, (cst.Add, cst.Modulo)):
                    node = parent
                    continue
                return finish(self._fallback(proven))
            if isinstance(parent, cst.Attribute) and parent.value is node:
                call = ctx.parent(parent)
                if parent.attr.value == "format" and isinstance(call, cst.Call) and call.func is parent:
                    node = call
                    continue
                return finish(self._fallback(proven))
            if isinstance(parent, cst.Lambda):
                node = parent
                continue
            if isinstance(parent, cst.Element):  # in a tuple/list/set display
                container = ctx.parent(parent)
                if "npu" in _strings_in(container) or self._adds_privateuse1(container):
                    return finish(Verdict.AWARE)
                node = container
                continue
            if isinstance(parent, cst.DictElement):
                if node is parent.value and is_device_word(string_value(parent.key)):
                    return finish(self._rewrite(f"the value of the {string_value(parent.key)!r} entry of a dict"))
                dict_key = dict_key or node is parent.key
                container = ctx.parent(parent)
                if "npu" in _strings_in(container):
                    return finish(Verdict.AWARE)
                node = container
                continue
            if isinstance(parent, (cst.Arg,)):
                return finish(self._argument(parent, node, proven, depth), parent)
            if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
                return finish(self._comparison(parent, node, proven))
            if isinstance(parent, (cst.Assign, cst.AnnAssign)) and node is parent.value:
                return finish(self._assignment(parent, proven, depth))
            if isinstance(parent, cst.Param) and node is parent.default:
                if is_device_word(parent.name.value):
                    return finish(self._rewrite(f"the default of the parameter `{parent.name.value}`"))
                return finish(self._flow(parent, proven, depth))
            if isinstance(parent, cst.Return):
                function = next((a for a in ctx.ancestors(parent) if isinstance(a, cst.FunctionDef)), None)
                if function is not None and is_device_word(function.name.value):
                    return finish(self._rewrite(f"returned by `{function.name.value}()`, whose name says it gives a device"))
                return finish(self._fallback(proven))
            if isinstance(parent, cst.Expr) and start is node and depth == 0:
                return Verdict.PROSE  # a bare string statement: a docstring or a comment-like string
            if isinstance(parent, cst.FormattedStringExpression):
                return Verdict.PROSE  # f"running on {'cuda'}"
            return finish(self._fallback(proven))

    def _fallback(self, proven: bool) -> Verdict:
        if proven:
            return self._rewrite("chosen by a test of `torch.cuda` (`... if torch.cuda.is_available() else ...`)")
        return Verdict.UNKNOWN

    def _tests_cuda(self, test: cst.CSTNode) -> bool:
        """``torch.cuda.is_available()`` (or any torch.cuda call) in a condition."""
        found = False
        ctx = self.ctx

        class _Find(cst.CSTVisitor):
            def visit_Attribute(self, node: cst.Attribute) -> bool:
                nonlocal found
                name = ctx.qualified_name(node)
                if name is not None and (name == "torch.cuda" or name.startswith("torch.cuda.")):
                    found = True
                return not found

            def visit_Name(self, node: cst.Name) -> None:
                nonlocal found
                name = ctx.resolver.qualified_name(node)
                if name is not None and name.startswith("torch.cuda."):
                    found = True

        test.visit(_Find())
        return found

    def _adds_privateuse1(self, container: cst.CSTNode) -> bool:
        """A list of device types in a function (or module) that adds the PrivateUse1
        backend itself (``kinds.append(torch._C._get_privateuse1_backend_name())``) or
        the NPU by name (``if hasattr(torch, "npu"): kinds.append("npu")``): the NPU is
        in it on Ascend, and ``'cuda'`` must stay for GPUs."""
        owner = next((a for a in self.ctx.ancestors(container) if isinstance(a, (cst.FunctionDef, cst.Module))), None)
        if owner is None:
            return False
        held = self._privateuse1.get(owner)
        if held is None:
            code = self.ctx.module.code_for_node(owner)
            held = "privateuse1" in code.lower() or _ADDS_NPU.search(code) is not None
            self._privateuse1[owner] = held
        return held

    def _mentions_npu(self, node: cst.CSTNode) -> bool:
        return "npu" in self.ctx.module.code_for_node(node).lower()

    # -- consumers ---------------------------------------------------------------------

    def _argument(self, arg: cst.Arg, value: cst.CSTNode, proven: bool, depth: int) -> Verdict:
        call = self.ctx.parent(arg)
        if not isinstance(call, cst.Call):
            return self._fallback(proven)
        keyword = arg.keyword.value if arg.keyword is not None else None
        callee = last_name(call.func)
        qualified = self.ctx.qualified_name(call.func)
        if callee in _PROSE_CALLS or (callee or "").endswith(("Error", "Exception", "Warning")):
            return Verdict.PROSE
        if callee == "add_argument":
            return self._argparse(call, keyword, proven)
        if keyword is not None:
            if is_device_word(keyword) or (keyword == "type" and qualified == "torch.device"):
                return self._rewrite(f"passed as `{keyword}=`" + (f" to `{qualified or callee}`" if (qualified or callee) else ""))
            if keyword == "default" and callee in _LOOKUPS:
                return self._lookup(call, proven)
            return self._fallback(proven)
        if arg.star:
            return self._fallback(proven)
        position = [a for a in call.args if a.keyword is None].index(arg)
        if qualified is not None:
            if POSITIONAL_DEVICE.get(qualified) == position:
                return self._rewrite(f"passed to `{qualified}` as its device")
            if qualified.startswith(("torch.cuda.", "torch.npu.")) and position == 0:
                return self._rewrite(f"passed to `{qualified}`")  # torch.cuda.set_device('cuda:0'), torch.cuda.synchronize('cuda')
        if isinstance(call.func, cst.Attribute) and callee in METHOD_DEVICE and position == 0:
            return self._rewrite(f"passed to `.{callee}()`, which takes a device")
        if isinstance(call.func, cst.Attribute) and callee in _PARSING_METHODS and position == 0:
            # str(device).startswith("cuda"), name.replace("cuda:", ""), device.split("cuda:")
            if self.is_device_expr(call.func.value):
                return self._rewrite(f"passed to `.{callee}()` of a device value, `{self._short(call.func.value)}`")
            return self._fallback(proven)
        if callee in _LOOKUPS and position >= 1:
            return self._lookup(call, proven)
        if callee in ("str", "repr") and depth == 0:
            return self._fallback(proven)
        if is_device_word(callee):
            return self._rewrite(f"passed to `{callee}()`, whose name says it takes a device")  # get_device('cuda'), move_to_device(batch, 'cuda')
        return self._fallback(proven)

    def _argparse(self, call: cst.Call, keyword: str | None, proven: bool) -> Verdict:
        if keyword not in ("default", "choices", "const"):
            return self._fallback(proven)
        names = [string_value(a.value) for a in call.args if a.keyword is None]
        dest = next((string_value(a.value) for a in call.args if a.keyword and a.keyword.value == "dest"), None)
        words = [n.lstrip("-").replace("-", "_") for n in [*names, dest] if n]
        if any(is_device_word(w) for w in words):
            return self._rewrite(f"the {keyword} of the argparse option `{next(w for w in words if is_device_word(w))}`")
        return self._fallback(proven)

    def _lookup(self, call: cst.Call, proven: bool) -> Verdict:
        """``cfg.get('device', 'cuda')``, ``os.getenv('DEVICE', 'cuda')``, ``getattr(args, 'device', 'cuda')``."""
        positional = [a for a in call.args if a.keyword is None]
        keys = [string_value(a.value) for a in positional[:2]]
        if any(is_device_word(k) for k in keys if k):
            return self._rewrite(f"the default of a lookup of `{next(k for k in keys if k and is_device_word(k))}`")
        return self._fallback(proven)

    def _comparison(self, parent: cst.CSTNode, node: cst.CSTNode, proven: bool) -> Verdict:
        ctx = self.ctx
        comparison = parent if isinstance(parent, cst.Comparison) else ctx.parent(parent)
        if not isinstance(comparison, cst.Comparison):
            return self._fallback(proven)
        operands = [comparison.left, *(t.comparator for t in comparison.comparisons)]
        others = [o for o in operands if o is not node]
        if any(self.is_device_expr(o) for o in others):
            return self._rewrite(f"compared with `{self._short(next(o for o in others if self.is_device_expr(o)))}`")
        return self._fallback(proven)

    def _assignment(self, assign: cst.Assign | cst.AnnAssign, proven: bool, depth: int) -> Verdict:
        targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
        if any(self.is_device_expr(t) for t in targets):
            return self._rewrite(f"assigned to `{self._short(next(t for t in targets if self.is_device_expr(t)))}`")
        names = [t for t in targets if isinstance(t, cst.Name)]
        if not names:
            return self._fallback(proven)
        verdicts = [self._flow(name, proven, depth) for name in names]
        if Verdict.REWRITE in verdicts:
            return Verdict.REWRITE
        if Verdict.AWARE in verdicts:
            return Verdict.AWARE
        return self._fallback(proven)

    def _flow(self, target: cst.Name | cst.Param, proven: bool, depth: int) -> Verdict:
        """Follow a name to its uses: a device if one of them is used as a device."""
        if depth >= self.MAX_FLOW:
            return self._fallback(proven)
        name = target.name.value if isinstance(target, cst.Param) else target.value
        scope = self.ctx.local_scope(target) or (
            self.ctx.local_scope(target.name) if isinstance(target, cst.Param) else None)
        if scope is None:
            return self._fallback(proven)
        try:
            assignments = scope.assignments[name]
        except Exception:  # noqa: BLE001 - libcst raises for odd names; treat as unknown
            return self._fallback(proven)
        verdicts = []
        why = None
        for assignment in assignments:
            if getattr(assignment, "node", None) is not target:
                continue
            for access in assignment.references:
                verdicts.append(self._walk(access.node, depth + 1))
                if verdicts[-1] is Verdict.REWRITE and why is None:
                    why = self._why
        if Verdict.REWRITE in verdicts:
            return self._rewrite(f"held in `{name}`, which is {why}")
        if Verdict.AWARE in verdicts:
            return Verdict.AWARE
        return self._fallback(proven)

    # -- what counts as a device expression --------------------------------------------

    def is_device_expr(self, node: cst.CSTNode) -> bool:
        """``device``, ``args.device``, ``x.device.type``, ``str(device)``, ``cfg['device']``,
        ``get_device()``, ``torch.device(...)``..."""
        if isinstance(node, cst.Name):
            return is_device_word(node.value)
        if isinstance(node, cst.Attribute):
            attr = node.attr.value
            if is_device_word(attr):
                return True
            # `<anything>.type` compared with 'cuda' is a device type (`x.device.type`,
            # `accelerator.type`, `torch.accelerator.current_accelerator().type`)
            return attr in ("type", "device_type")
        if isinstance(node, cst.Call):
            callee = last_name(node.func)
            qualified = self.ctx.qualified_name(node.func)
            if qualified in ("torch.device",) or self._is_accelerator_call(node):
                return True
            if callee in ("str", "repr") and node.args:
                return self.is_device_expr(node.args[0].value)
            if isinstance(node.func, cst.Attribute) and callee in ("lower", "strip", "upper", "casefold"):
                return self.is_device_expr(node.func.value)
            return is_device_word(callee) and callee not in ("get_device",)  # Tensor.get_device() is an int
        if isinstance(node, cst.Subscript):
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                return is_device_word(string_value(node.slice[0].slice.value))
        return False

    def _is_accelerator_call(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, cst.Call):
            return False
        qualified = self.ctx.qualified_name(node.func) or ""
        return qualified.startswith("torch.accelerator.")


_ANALYSES: dict[int, tuple[FileContext, DeviceAnalysis]] = {}


def analysis(ctx: FileContext) -> DeviceAnalysis:
    """One analysis per file context (NPU104 and NPU108 share the cache)."""
    held = _ANALYSES.get(id(ctx))
    if held is None or held[0] is not ctx:
        _ANALYSES.clear()  # one file at a time per process
        held = (ctx, DeviceAnalysis(ctx))
        _ANALYSES[id(ctx)] = held
    return held[1]


class DeviceLiteralRule(Rule):
    """Shared by NPU104 (rewrites) and NPU108 (reports): collects every literal that
    looks like a CUDA device during the pass; subclasses decide in ``leave_file``
    with the file-wide :func:`analysis`."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.candidates: list[cst.CSTNode] = []

    def visit_Call(self, node: cst.Call) -> None:
        # Resolve now: the engine checks, after the pass, which import names were relied on.
        self.qualified_name(node.func)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.ConcatenatedString) and parent.left is not node:
            return
        if literal_is_device(node):
            self.candidates.append(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if literal_is_device(node):
            self.candidates.append(node)
