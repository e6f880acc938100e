"""Shared by the data-parallel rules: NPU510 (``nn.DataParallel`` -> DDP), NPU511
(single device -> DDP, opt-in) and NPU913 (what cannot be rewritten).

A script made data parallel runs unchanged as one process, and as one process per
NPU under torchrun (see ``runtime/npu_runtime/parallel.py``). Besides the model
wrapper, that takes:

* ``npu_runtime.init_data_parallel()`` at the start of the entry point, so the
  process group exists before the loaders are built;
* a DistributedSampler (and ``set_epoch``) for shuffled loaders, whose batch is
  divided by the world size (``rules/sampler/_shard.py``);
* literal device 0 (``"cuda:0"``, ``.cuda(0)``) turned into "the current device",
  which is this process's NPU once the group is set up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from npu_migrate.pipeline.entry_points import is_library
from npu_migrate.rules.checkpoint._common import insert_item
from npu_migrate.rules.device._device_strings import (
    Flow,
    analysis,
    literal_is_device,
)
from npu_migrate.rules.sampler._common import DATALOADERS, DISTRIBUTED, function_of
from npu_migrate.rules.sampler._shard import LoaderSharding

from npu_migrate.pipeline.file_roles import is_test_path
from npu_migrate.python.cst_util import call_arg, is_docstring, is_main_guard, string_value
from npu_migrate.python.rule import Rule

DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
FUNCTIONAL = frozenset({"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"})
DDP = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
)
#: calls that show a file already runs as one process per device, on its own
USER_DISTRIBUTED = DISTRIBUTED | {
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
    "torch.multiprocessing.spawn.spawn",
    "npu_runtime.init_distributed",
}
#: what NPU510 / NPU511 leave behind: a file holding them was converted by a run before
CONVERTED = frozenset({"npu_runtime.data_parallel", "npu_runtime.distribute_model"})
SET_DEVICE = frozenset({"torch.cuda.set_device", "torch.npu.set_device"})
#: calls that write files: one process (rank 0) does it, as under DataParallel
WRITERS = frozenset(
    {
        "torch.save",
        "os.mkdir",
        "os.makedirs",
        "shutil.copyfile",
        "shutil.copy",
        "shutil.copy2",
        "shutil.move",
    }
)
MAIN_PROCESS = "npu_runtime.is_main_process()"
#: an ``if`` that already picks one process (``if rank == 0:``, ``if is_main_process():``)
_ONE_PROCESS_TEST = re.compile(r"rank|is_main|main_process|master", re.IGNORECASE)
INIT = "npu_runtime.init_data_parallel()"
_DEVICE_ZERO = re.compile(r"(?:cuda|npu):0")


@dataclass(frozen=True)
class Plan:
    """What NPU510 does with one ``DataParallel(...)`` call."""

    rewrite: bool
    #: False: a submodule (``model.features = DataParallel(model.features)``) gets the
    #: single-process wrapper only (``ddp=False``): DDP must wrap the whole model.
    whole_model: bool = True
    #: why it is not rewritten, or the caveat of a submodule rewrite
    reason: str | None = None


def _is_call_to(ctx, node: cst.CSTNode | None, names: frozenset[str]) -> bool:
    return isinstance(node, cst.Call) and ctx.qualified_name(node.func) in names


def runtime_name_taken(ctx) -> bool:
    """``npu_runtime`` means something other than the runtime package in this file."""
    bound = ctx.imports.bindings.get("npu_runtime")
    if bound is not None and bound != "npu_runtime":
        return True
    # (`npu_runtime = None` is the except body of NPU701's guarded import: still the package)
    return bool(re.search(r"^\s*(?:def|class)\s+npu_runtime\b|\bnpu_runtime\s*=(?!=|\s*None\b)", ctx.text,
                          re.MULTILINE))


def _in_tests(path: str | None) -> bool:
    return bool(path) and is_test_path(path)


def plan(ctx, call: cst.Call) -> Plan:
    """Whether the ``DataParallel(...)`` call ``call`` can be rewritten, and how."""
    module = call_arg(call, "module", 0)
    if module is None or any(a.star for a in call.args if a.keyword is None and a is not module):
        return Plan(False, reason="its module is passed through `*args`")
    if _is_call_to(ctx, module.value, DATA_PARALLEL | DDP):
        return Plan(False, reason="nested wrappers: it wraps another DataParallel/DDP")
    parent = ctx.parent(call)
    if isinstance(parent, cst.Arg) and _is_call_to(ctx, ctx.parent(parent), DATA_PARALLEL | DDP):
        return Plan(False, reason="nested wrappers: it is wrapped again in DataParallel/DDP")
    if runtime_name_taken(ctx):
        return Plan(False, reason="the name `npu_runtime` is bound to something else in this file")
    if _in_tests(ctx.path):
        return Plan(False, reason="a test file: its DataParallel is what it tests (wrapping, unwrapping, "
                    "`.module`); the runtime's wrapper would change what the test checks")
    if is_library(ctx.path, ctx.facts):
        # tianshou's utils/net/common.py: a top-level `import npu_runtime` there made `import
        # tianshou` fail wherever npu-runtime is not installed, CPU machines included
        return Plan(False, reason="library code (a module of a package, or one the project imports): the "
                    "rewrite needs a top-level `import npu_runtime`, which every import of the library would "
                    "then need; call npu_runtime.data_parallel(...) here once the library declares npu-runtime, "
                    "or leave DataParallel to the scripts that build the model")
    if _is_submodule(ctx, call, parent):
        return Plan(
            True,
            whole_model=False,
            reason="DataParallel around a submodule: one process runs as before (a single-process wrapper "
            "keeps the `module.` keys), but DDP must wrap the whole model, so several processes would each "
            "keep their own weights",
        )
    return Plan(True)


REWRITER = "NPU510"


def rewrites_data_parallel(ctx, call: cst.Call) -> bool:
    """This run turns the ``DataParallel(...)`` call ``call`` into ``npu_runtime.data_parallel``
    (NPU510 is selected and the call is safe to rewrite). For classifiers of CUDA-only
    code: such a call runs on NPU after migration, so a branch holding it may become an
    NPU branch; any other ``DataParallel`` stays CUDA-only, and an NPU path must not
    lead into it."""
    return REWRITER in ctx.active and ctx.qualified_name(call.func) in DATA_PARALLEL and plan(ctx, call).rewrite


def _is_submodule(ctx, call: cst.Call, parent: cst.CSTNode | None) -> bool:
    """``model.features = DataParallel(model.features)``: the target is an attribute of
    something other than ``self`` that is itself used as a model elsewhere."""
    if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
        return False
    target = parent.targets[0].target
    if not isinstance(target, cst.Attribute):
        return False
    owner = ctx.module.code_for_node(target.value)
    if owner == "self":
        return False
    uses = re.compile(rf"\b{re.escape(owner)}\s*\.\s*(?:parameters|cuda|npu|to|state_dict|train|eval)\s*\(")
    return bool(uses.search(ctx.text))


class ParallelConversion(Rule):
    """Base of NPU510 and NPU511: collects what a conversion to DDP touches during the
    pass; subclasses decide in ``leave_file``."""

    whole_file = True  # the entry point, loaders, epoch loops and the model live apart

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.data_parallel: list[cst.Call] = []
        self.loaders: list[cst.Call] = []
        self.distributed: list[cst.Call] = []
        self.converted: dict[str, list[cst.Call]] = {name: [] for name in CONVERTED}
        self.fors: list[cst.For] = []
        self.isinstance_checks: list[cst.Call] = []
        self.set_devices: list[cst.Call] = []
        self.device_zero_calls: list[cst.Call] = []
        self.device_strings: list[cst.SimpleString] = []
        self.writers: list[cst.Call] = []
        self.init_calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in DATA_PARALLEL:
            self.data_parallel.append(node)
        elif qualified in DATALOADERS:
            self.loaders.append(node)
        elif qualified in USER_DISTRIBUTED:
            self.distributed.append(node)
        elif qualified in CONVERTED:
            self.converted[qualified].append(node)
        elif qualified in SET_DEVICE:
            self.set_devices.append(node)
        elif isinstance(node.func, cst.Name) and node.func.value == "isinstance" and len(node.args) == 2:
            self.isinstance_checks.append(node)
        elif qualified == "npu_runtime.init_data_parallel":
            self.init_calls.append(node)
        elif qualified in WRITERS:
            self.writers.append(node)
        elif _is_device_zero_call(self.ctx, node, qualified):
            self.device_zero_calls.append(node)
        self.visit_call(node, qualified)

    def visit_call(self, node: cst.Call, qualified: str | None) -> None:
        """For subclasses: every call, with its qualified name."""

    def visit_For(self, node: cst.For) -> None:
        self.fors.append(node)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if string_value(node) == "cuda:0" and literal_is_device(node):
            self.device_strings.append(node)

    # -- decisions shared by NPU510 and NPU511 ------------------------------------------

    def already_distributed(self) -> bool:
        """The file has its own distributed path (DDP, ``init_process_group``, ``mp.spawn``)."""
        return bool(self.distributed)

    def convert(self, anchor: cst.CSTNode, where: str) -> None:
        """The steps around the model wrapper: the process group at the entry point,
        sharded loaders, and device 0 made "this process's device". On a file a
        previous run converted, the same steps find nothing left to change and
        report again what still needs a hand."""
        built_too_early = self.place_init(anchor)
        sharding = LoaderSharding(
            self, self.fors, where=where, built_too_early=built_too_early, per_process_batch=True
        )
        sharded = [loader for loader in self.loaders if sharding.shard(loader)]
        sharding.finish()
        handled = any(
            self._reported_on(loader) or call_arg(loader, "sampler", 3) is not None for loader in self.loaders
        )
        if not sharded and not handled:
            self.report(
                _outside_branches(self.ctx, anchor),
                f"{where}: no shuffled DataLoader in this file to shard, so under torchrun every process "
                "reads the whole dataset (the same training as one process, without the speed-up)",
                "give the training loader `sampler=DistributedSampler(dataset) if dist.is_initialized() else None`, "
                "`shuffle=sampler is None`, `batch_size=npu_runtime.per_process_batch_size(batch, sampler)` and "
                "call `sampler.set_epoch(epoch)` every epoch",
            )
        self.unpin_device_zero()
        self.single_writer()

    def _reported_on(self, node: cst.CSTNode) -> bool:
        return any(f.node is node and f.rule == self.id for f in self.ctx.findings)

    def place_init(self, anchor: cst.CSTNode) -> Callable[[cst.CSTNode], str | None]:
        """Insert ``npu_runtime.init_data_parallel()`` where the program starts (unless a run
        before did), and return the test for loaders built before it (``LoaderSharding``)."""
        ctx = self.ctx
        body = list(ctx.module.body)
        guard = next((s for s in body if is_main_guard(s) and isinstance(s.body, cst.IndentedBlock)), None)
        if self.init_calls:
            return self._built_before(self.init_calls[0], guard)
        message = (
            "join the process group when launched as several processes "
            "(`npu_runtime.init_data_parallel()`; one process stays as it was)"
        )
        init = cst.parse_statement(INIT + "\n", config=ctx.module.config_for_parsing)
        top = _top_statement(ctx, anchor)
        self.add_import("npu_runtime")
        if top is not guard and function_of(ctx, anchor) is ctx.module:
            # a script: right after its imports, before any module-level data or model code
            imports = [s for s in body[: body.index(top)] if _is_import(s)]
            if imports:
                self.insert_after(imports[-1], [init], message, anchor=anchor)
            else:
                self.insert_before(top, [init], message, anchor=anchor)
            return self._built_before(anchor, guard)
        if guard is not None:
            self.insert_before(guard.body.body[0], [init], message, anchor=anchor)
            return self._built_before(guard.body.body[0], guard)
        home = function_of(ctx, anchor)
        if isinstance(home, cst.FunctionDef) and isinstance(home.body, cst.IndentedBlock):
            statements = home.body.body
            first = statements[1] if len(statements) > 1 and is_docstring(statements[0]) else statements[0]
            self.insert_before(first, [init], message, anchor=anchor)
        return self._built_before(anchor, guard)

    def _built_before(self, site: cst.CSTNode, guard: cst.CSTNode | None) -> Callable[[cst.CSTNode], str | None]:
        """Which loaders are built before the process group is joined at ``site`` (the init
        call, or where it goes): module-level ones, when it is joined in the ``__main__``
        block or in a function."""
        ctx = self.ctx
        top = _top_statement(ctx, site)
        home = function_of(ctx, site)
        if top is guard and guard is not None:
            where = "before `npu_runtime.init_data_parallel()` in the `__main__` block"
        elif home is ctx.module:
            return lambda statement: None
        elif isinstance(home, cst.FunctionDef):
            where = f"before `{home.name.value}()` joins the process group"
        else:
            return lambda statement: None

        def at_import(statement: cst.CSTNode) -> str | None:
            if function_of(ctx, statement) is ctx.module and _top_statement(ctx, statement) is not guard:
                return f"the loader is built when the module is imported, {where}"
            return None

        return at_import

    def single_writer(self) -> None:
        """``torch.save(...)`` (and mkdir / copy) statements run on one process only."""
        for call in self.writers:
            exist_ok = call_arg(call, "exist_ok", 2) if self.qualified_name(call.func) == "os.makedirs" else None
            if exist_ok is not None and not (isinstance(exist_ok.value, cst.Name) and exist_ok.value.value == "False"):
                continue  # os.makedirs(..., exist_ok=True) is safe on every process
            line = self.ctx.parent(self.ctx.parent(call))
            statement_is_call = isinstance(self.ctx.parent(call), cst.Expr) and isinstance(line, cst.SimpleStatementLine)
            if statement_is_call and self._one_process_already(line):
                continue
            name = self.ctx.module.code_for_node(call.func)
            if not statement_is_call or len(line.body) != 1:
                self.report(
                    call,
                    f"`{name}(...)` runs on every process of a job made data parallel, and is not a statement "
                    "of its own, so it is not guarded",
                    f"run it only when `{MAIN_PROCESS}` (rank 0, or a single process)",
                )
                continue
            owner = self._sole_statement_of(line)
            if owner is not None:
                # `if not os.path.isdir(d):` holding only `os.mkdir(d)`: the test takes the
                # guard (`... and npu_runtime.is_main_process()`), not a nested `if` (SIM102)
                self.replace(
                    owner.test,
                    _and_main_process,
                    f"`{name}(...)` on one process only (`{MAIN_PROCESS}`), as under DataParallel",
                    needs_torch_npu=False,
                    anchor=call,
                )
            else:
                self.replace(
                    line,
                    lambda node: _guarded(node, self.ctx.module.default_indent),
                    f"`{name}(...)` on one process only (`{MAIN_PROCESS}`), as under DataParallel",
                    needs_torch_npu=False,
                    anchor=call,
                )
            self.add_import("npu_runtime")

    def _sole_statement_of(self, line: cst.SimpleStatementLine) -> cst.If | None:
        """The ``if`` (no ``elif``/``else``) whose whole body is ``line``, where no device
        rule edits its test."""
        block = self.ctx.parent(line)
        owner = self.ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not (isinstance(owner, cst.If) and owner.orelse is None and len(block.body) == 1):
            return None
        test = self.ctx.module.code_for_node(owner.test)
        return None if re.search(r"cuda|npu|device|rank", test, re.IGNORECASE) else owner

    def _one_process_already(self, line: cst.CSTNode) -> bool:
        for ancestor in self.ctx.ancestors(line):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If) and _ONE_PROCESS_TEST.search(self.ctx.module.code_for_node(ancestor.test)):
                return True
        return False

    def unpin_device_zero(self) -> None:
        """Device 0 written out means "the device" in a one-process script; under DDP each
        process has its own, which is the current device once ``init_data_parallel``
        has run (and still NPU 0 in one process)."""
        strings = analysis(self.ctx)
        for literal in self.device_strings:
            if strings.classify(literal) is Flow.TORCH:
                self.replace(
                    literal,
                    _current_device_string,
                    f"device string {self.ctx.module.code_for_node(literal)} -> the current device "
                    "(each process's own NPU under DDP; NPU 0 in one process)",
                )
        for call in self.device_zero_calls:
            self.replace(
                call,
                _without_device_zero,
                "device 0 -> the current device (each process's own NPU under DDP; NPU 0 in one process)",
            )
        for call in self.set_devices:
            self.report(
                call,
                "`set_device` in a script made data parallel: under torchrun every process would switch to "
                "this same device",
                "drop it (npu_runtime.init_data_parallel() sets each process's own NPU) or run it only when "
                "`not torch.distributed.is_initialized()`",
            )


def _and_main_process(test: cst.BaseExpression) -> cst.BaseExpression:
    """``test and npu_runtime.is_main_process()`` (a low-precedence test in parentheses)."""
    if isinstance(test, (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)) and not test.lpar:
        test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BooleanOperation(left=test, operator=cst.And(), right=cst.parse_expression(MAIN_PROCESS))


def _guarded(line: cst.SimpleStatementLine, indent: str) -> cst.If:
    """``line`` as the body of ``if npu_runtime.is_main_process():`` (comments above stay above)."""
    guard = cst.parse_statement(f"if {MAIN_PROCESS}:\n{indent}pass\n")
    assert isinstance(guard, cst.If) and isinstance(guard.body, cst.IndentedBlock)
    body = guard.body.with_changes(body=[line.with_changes(leading_lines=())])
    return guard.with_changes(body=body, leading_lines=line.leading_lines)


def _is_device_zero_call(ctx, node: cst.Call, qualified: str | None) -> bool:
    """``x.cuda(0)`` / ``x.npu(0)`` / ``torch.device("cuda", 0)``."""
    if qualified == "torch.device":
        kind = call_arg(node, "type", 0)
        index = call_arg(node, "index", 1)
        return (
            len(node.args) == 2
            and kind is not None
            and string_value(kind.value) in ("cuda", "npu")
            and index is not None
            and _is_zero(index.value)
        )
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("cuda", "npu") and len(node.args) == 1:
        arg = node.args[0]
        return (arg.keyword is None or arg.keyword.value == "device") and not arg.star and _is_zero(arg.value)
    return False


def _is_zero(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == 0


def _current_device_string(node: cst.CSTNode) -> cst.CSTNode:
    """``"cuda:0"`` / ``"npu:0"`` -> ``"npu"`` (quotes and prefix kept)."""
    if not isinstance(node, cst.SimpleString):
        return node
    head = len(node.prefix) + len(node.quote)
    body = node.value[head : len(node.value) - len(node.quote)]
    if not _DEVICE_ZERO.fullmatch(body):
        return node
    return node.with_changes(value=node.value[:head] + "npu" + node.quote)


def _without_device_zero(call: cst.Call) -> cst.Call:
    """``x.npu(0)`` -> ``x.npu()``; ``torch.device("npu", 0)`` -> ``torch.device("npu")``."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("cuda", "npu"):
        return call.with_changes(args=())
    first = call.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=(first,))


def with_keyword(call: cst.Call, keyword: str, value: str) -> cst.Call:
    """``call`` with ``keyword=value`` appended, laid out like its other arguments."""
    arg = cst.Arg(
        value=cst.parse_expression(value),
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return call.with_changes(args=insert_item(call.args, len(call.args) - 1, arg, call.whitespace_before_args))


def _outside_branches(ctx, node: cst.CSTNode) -> cst.CSTNode:
    """The outermost ``if`` around ``node`` in its function (else ``node``): a finding about
    the whole file must not sit in a branch that a later run sees as NPU code (NPU010)."""
    outer = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, cst.If):
            outer = ancestor
    return outer


def _top_statement(ctx, node: cst.CSTNode) -> cst.CSTNode:
    """The module-level statement that contains ``node``."""
    top = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Module):
            break
        top = ancestor
    return top


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


