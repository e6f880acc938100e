"""NPU610: torch.profiler code becomes torch_npu.profiler code where the mapping is exact."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import (
    call_arg,
    from_import_names,
    string_value,
    with_string_value,
)
from npu_migrate.python.imports import (
    GUARD_COMMENT,
    GUARD_EXCEPTION,
    NPU_ACTIVITY_IS_CUDA,
    is_cpu_path_handler,
)
from npu_migrate.python.rule import Example, Rule

from ._common import (
    HANDLER_PARAMETERS,
    MISSING_METHODS,
    NPU_ACTIVITIES,
    OPERATOR_TABLE,
    PROFILE_KEYWORDS,
    SOURCE,
    STACK_METRICS,
    TARGET,
    is_neutral,
    mapped,
    normalize,
)

#: advice for the torch.profiler.profile keywords torch_npu.profiler.profile lacks or reads differently
_KEYWORD_ADVICE = {
    "use_cuda": (
        "`use_cuda` selects CUDA activity (and is deprecated)",
        f"drop it and pass {NPU_ACTIVITIES}",
    ),
    "experimental_config": (
        (
            "torch.profiler's `experimental_config` (a Kineto/CUPTI `_ExperimentalConfig`) means nothing to "
            "torch_npu.profiler, which takes its own"
        ),
        (
            f"pass experimental_config={TARGET}._ExperimentalConfig(profiler_level={TARGET}.ProfilerLevel.Level1, "
            f"aic_metrics={TARGET}.AiCMetrics.PipeUtilization) (Ascend levels and AI Core counters)"
        ),
    ),
    "acc_events": (
        "torch_npu.profiler.profile has no `acc_events` (it analyses each recording offline)",
        "drop it: each recording is written out and analysed by torch_npu.profiler.tensorboard_trace_handler",
    ),
    "post_processing_timeout_s": (
        "torch_npu.profiler.profile has no `post_processing_timeout_s`",
        "drop it: torch_npu.profiler.tensorboard_trace_handler(DIR, async_mode=True) analyses in the background",
    ),
}


class TorchProfiler(Rule):
    id = "NPU610"
    name = "torch-profiler"
    summary = (
        "Move torch.profiler profiling (profile, schedule, ProfilerActivity.CUDA, "
        "tensorboard_trace_handler) to torch_npu.profiler where the mapping is exact"
    )
    triggers = ("profiler",)
    whole_file = (
        True  # one profiler object is built in one function and read in another
    )
    rationale = f"""
`torch.profiler` with `ProfilerActivity.CUDA` records CUPTI kernel activity;
on Ascend there is none, and the NPU side (operators, AI Core kernels, memory,
communication) is recorded by `torch_npu.profiler` instead. Left as it is, the
profile runs, warns that CUDA is unavailable and records host time only.

The names that map are the ones torch_npu's own run-time patcher
(`torch_npu.contrib.transfer_to_npu`, `_patch_profiler`) maps, each checked
against torch_npu 2.13's sources:

| torch.profiler | torch_npu.profiler |
| --- | --- |
| `profile(...)` | `profile(...)` (same keywords: `activities`, `schedule`, `on_trace_ready`, `record_shapes`, `profile_memory`, `with_stack`, `with_flops`, `with_modules`, `execution_trace_observer`, `custom_trace_id_callback`; context manager, `start`/`stop`/`step`, `export_chrome_trace`, `export_stacks`, `export_memory_timeline`, `add_metadata`) |
| `ProfilerActivity.CUDA` / `.CPU` | `ProfilerActivity.NPU` / `.CPU` (torch_npu's own enum) |
| `schedule(wait=, warmup=, active=, repeat=, skip_first=, skip_first_wait=)` | `schedule(...)`, the same keywords and cycle |
| `tensorboard_trace_handler(dir_name, worker_name)` | `tensorboard_trace_handler(dir_name, worker_name)`: writes an Ascend profiling directory (`*_ascend_pt`, viewable in MindStudio Insight or the Ascend TensorBoard plugin) instead of a `.pt.trace.json` |
| `ProfilerAction.*`, `supported_activities()` | the same names |
| `export_stacks(path, "self_cuda_time_total")` | `export_stacks(path, "self_npu_time_total")` |

`record_function` and the other torch.profiler helpers keep working beside
torch_npu's profiler and are left alone. Imports follow the file:
`from torch.profiler import profile, ProfilerActivity` becomes
`from {TARGET} import ...` (split when it also imports `record_function`),
`torch.profiler.profile` becomes `{TARGET}.profile` (with `import torch_npu`).
A moved import is written as `try: from {TARGET} import ...` / `except
ModuleNotFoundError: from torch.profiler import ...` (likewise `import
torch.profiler as tp` and `from torch import profiler`), so the file still
imports without torch_npu and its CPU path runs, profiling included: the `except`
body makes torch's `ProfilerActivity.NPU` another name of `ProfilerActivity.CUDA`
(torch's enum has no NPU member), and where the file's only use of torch_npu is the
dotted `torch_npu.profiler.X`, the import guard binds `torch_npu` to torch there, so
`torch_npu.profiler` is torch.profiler, as the original was (held-out round 14: smollm's
trainer stopped with a NameError when profiling on a CPU machine). An
import that shares its line with another statement (`import os; from
torch.profiler import profile`) keeps the file on torch.profiler, reported.

**All or nothing per file.** torch's and torch_npu's `ProfilerActivity` are
different enums and their `profile` objects have different methods, so a file
is rewritten only when every torch.profiler use in it maps. Otherwise nothing
in it changes, and each blocker is reported with the NPU equivalent, as is
each `ProfilerActivity.CUDA` left behind:

- `key_averages()` / `events()` anywhere in the file (the classic
  `prof.key_averages().table(sort_by="cuda_time_total")`): torch_npu's profile
  has no in-process tables; {OPERATOR_TABLE}.
- `profile(use_cuda=..., experimental_config=<torch's>, acc_events=...,
  post_processing_timeout_s=...)`, `**kwargs`, or positional arguments.
- `profile(activities=...)` given anything but a list of `ProfilerActivity` members
  written in the file (`activities=self.ACTIVITIES` of a base class from xformers):
  torch's enum values would reach torch_npu's profile.
- `tensorboard_trace_handler(..., use_gzip=..., use_python_export=...)`.
- other torch.profiler names (`_ExperimentalConfig`, `ProfilerActivity.XPU`...),
  `from torch.profiler import *`.

A profile object handed to another module is assumed to be used through the
methods both profilers share.
"""
    examples = (
        Example(
            "import torch\n"
            "from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],\n"
            "             schedule=schedule(wait=1, warmup=1, active=3),\n"
            '             on_trace_ready=tensorboard_trace_handler("./log")) as prof:\n'
            "    for batch in loader:\n"
            "        train_step(batch)\n"
            "        prof.step()\n",
            "import torch\n"
            "try:\n"
            "    from torch_npu.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler\n"
            f"except {GUARD_EXCEPTION}:  {GUARD_COMMENT}\n"
            "    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler\n"
            "    ProfilerActivity.NPU = ProfilerActivity.CUDA\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],\n"
            "             schedule=schedule(wait=1, warmup=1, active=3),\n"
            '             on_trace_ready=tensorboard_trace_handler("./log")) as prof:\n'
            "    for batch in loader:\n"
            "        train_step(batch)\n"
            "        prof.step()\n",
        ),
        Example(
            "import torch\n"
            "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:\n"
            "    model(x)\n"
            'print(prof.key_averages().table(sort_by="cuda_time_total"))  # reported\n'
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.uses: list[tuple[cst.CSTNode, str]] = []
        self.from_imports: list[cst.ImportFrom] = []
        #: local name of `import torch.profiler as tp` / `from torch import profiler` -> (statement, alias)
        self.module_aliases: dict[
            str, tuple[cst.Import | cst.ImportFrom, cst.ImportAlias]
        ] = {}
        self.missing_calls: list[cst.Attribute] = []
        self.stack_calls: list[cst.Call] = []
        self.blockers: list[tuple[cst.CSTNode, str, str]] = []

    # -- collection ----------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.ctx.parent(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            if node.attr.value in MISSING_METHODS:
                self.missing_calls.append(node)
            elif node.attr.value == "export_stacks":
                self.stack_calls.append(parent)
        self._use(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def _use(self, node: cst.Attribute | cst.Name) -> None:
        qualified = normalize(self.ctx.use_name(node))
        if qualified is not None and not self._on_cpu_path(node):
            self.uses.append((node, qualified))

    def _on_cpu_path(self, node: cst.CSTNode) -> bool:
        """In the ``except`` body of a guard the tool wrote: torch.profiler's names there
        (``from torch.profiler import profile``, ``ProfilerActivity.NPU = ...CUDA``) are the
        migrated file's CPU path, not uses to move again. Without this, a file holding both
        NPU610's moved import and another rule's guard read its own output as `profile`
        imported from torch.profiler and from torch_npu.profiler on the next run."""
        return any(is_cpu_path_handler(ancestor) for ancestor in self.ctx.ancestors(node))

    def visit_Import(self, node: cst.Import) -> None:
        if self._on_cpu_path(node):
            return
        for alias in node.names:
            full = normalize(cst.helpers.get_full_name_for_node(alias.name))
            if full == SOURCE and alias.asname is not None:
                self.module_aliases[
                    cst.helpers.get_full_name_for_node(alias.asname.name)
                ] = (node, alias)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or self._on_cpu_path(node):
            return
        module = normalize(cst.helpers.get_full_name_for_node(node.module))
        if module == SOURCE:
            if isinstance(node.names, cst.ImportStar):
                self.blockers.append(
                    (
                        node,
                        "`from torch.profiler import *` hides which torch.profiler names the file uses",
                        (
                            f"import the names you use explicitly (from {TARGET} for profile, schedule, "
                            "ProfilerActivity, tensorboard_trace_handler)"
                        ),
                    )
                )
            else:
                self.from_imports.append(node)
        elif cst.helpers.get_full_name_for_node(
            node.module
        ) == "torch" and not isinstance(node.names, cst.ImportStar):
            for alias, full, local in from_import_names(node):
                if full == SOURCE:
                    self.module_aliases[local] = (node, alias)

    # -- decisions -------------------------------------------------------------------------

    def leave_file(self) -> None:
        actionable: list[tuple[cst.CSTNode, str, str]] = []
        for node, qualified in self.uses:
            if is_neutral(qualified):
                continue
            target = mapped(qualified)
            if target is None:
                self.blockers.append(
                    (
                        node,
                        f"`{qualified}` has no torch_npu.profiler counterpart",
                        (
                            f"use {TARGET}.profile / schedule / ProfilerActivity.NPU / tensorboard_trace_handler, "
                            f"and {TARGET}._ExperimentalConfig for Ascend-specific settings"
                        ),
                    )
                )
                continue
            actionable.append((node, qualified, target))
            call = self.ctx.parent(node)
            if isinstance(call, cst.Call) and call.func is node:
                if qualified == f"{SOURCE}.profile":
                    self._check_profile(call)
                elif qualified == f"{SOURCE}.tensorboard_trace_handler":
                    self._check_handler(call)
        if not actionable:
            if self.blockers:  # a star import, `torch.profiler._ExperimentalConfig`...
                self._report(actionable)
            return
        for attribute in self.missing_calls:
            method = attribute.attr.value
            self.blockers.append(
                (
                    attribute,
                    (
                        f"`{method}()`: torch_npu.profiler.profile has no `{method}()`, so this file stays on "
                        "torch.profiler, which records no NPU activity"
                    ),
                    OPERATOR_TABLE,
                )
            )
        for name in self.module_aliases.keys() | {
            local
            for node in self.from_imports
            for _, _, local in from_import_names(node)
        }:
            if name in self.ctx.imports.conflicting:
                self.blockers.append(
                    (
                        self.ctx.module,
                        f"`{name}` is imported from torch.profiler and from elsewhere",
                        f"import torch_npu.profiler names under their own names ({TARGET}.profile ...)",
                    )
                )
        for statement in [*self.from_imports, *(s for s, _ in self.module_aliases.values())]:
            line = self.ctx.parent(statement)
            if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
                self.blockers.append(
                    (
                        statement,
                        "this torch.profiler import shares its line with another statement",
                        "put it on a line of its own, then run again: the moved import is written guarded "
                        "(try: torch_npu.profiler / except ModuleNotFoundError: torch.profiler)",
                    )
                )
        if self.blockers:
            self._report(actionable)
        else:
            self._rewrite(actionable)

    def _check_profile(self, call: cst.Call) -> None:
        for arg in call.args:
            if arg.star:
                self.blockers.append(
                    (
                        arg,
                        "`**` arguments of torch.profiler.profile cannot be checked against torch_npu.profiler",
                        f"pass the keywords explicitly ({', '.join(sorted(PROFILE_KEYWORDS))})",
                    )
                )
            elif arg.keyword is None:
                self.blockers.append(
                    (
                        arg,
                        "torch.profiler.profile takes keyword arguments only",
                        "pass it by keyword",
                    )
                )
            elif arg.keyword.value == "activities" and not self._activities_of_this_file(arg.value):
                self.blockers.append(
                    (
                        arg,
                        (
                            f"`activities={self.ctx.module.code_for_node(arg.value)}` is not a list of "
                            "torch.profiler.ProfilerActivity members written here: torch's values would reach "
                            "torch_npu.profiler.profile, whose ProfilerActivity is another enum"
                        ),
                        f"list the activities here ([{TARGET}.ProfilerActivity.CPU, {TARGET}.ProfilerActivity.NPU])",
                    )
                )
            elif arg.keyword.value not in PROFILE_KEYWORDS:
                keyword = arg.keyword.value
                message, suggestion = _KEYWORD_ADVICE.get(
                    keyword,
                    (
                        f"torch_npu.profiler.profile has no `{keyword}`",
                        f"torch_npu.profiler.profile takes {', '.join(sorted(PROFILE_KEYWORDS))}",
                    ),
                )
                self.blockers.append((arg, message, suggestion))

    def _activities_of_this_file(self, value: cst.BaseExpression) -> bool:
        """``[ProfilerActivity.CPU, ProfilerActivity.CUDA]`` (or a tuple, set, or
        ``supported_activities()``), each member named through torch.profiler here; not a
        value from elsewhere (``self.ACTIVITIES`` of xformers' profiler class)."""
        if isinstance(value, cst.Call):
            return normalize(self.ctx.use_name(value.func)) == f"{SOURCE}.supported_activities"
        if isinstance(value, cst.Name):  # `ACTIVITIES = [...]` once at the module's top level
            bound = [
                small.value
                for statement in self.ctx.module.body
                if isinstance(statement, cst.SimpleStatementLine)
                for small in statement.body
                if isinstance(small, cst.Assign)
                and any(isinstance(t.target, cst.Name) and t.target.value == value.value for t in small.targets)
            ]
            return len(bound) == 1 and not isinstance(bound[0], cst.Name) and self._activities_of_this_file(bound[0])
        if not isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return False
        return all(
            not isinstance(element, cst.StarredElement)
            and (normalize(self.ctx.use_name(element.value)) or "").startswith(f"{SOURCE}.ProfilerActivity.")
            for element in value.elements
        )

    def _check_handler(self, call: cst.Call) -> None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        for arg in call.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if (
                arg.star
                or (keyword is not None and keyword not in HANDLER_PARAMETERS)
                or (
                    keyword is None and positional.index(arg) >= len(HANDLER_PARAMETERS)
                )
            ):
                what = keyword or ("**" if arg.star else "a third positional argument")
                self.blockers.append(
                    (
                        arg,
                        (
                            f"torch_npu.profiler.tensorboard_trace_handler has no `{what}` (it takes dir_name, "
                            "worker_name, analyse_flag, async_mode)"
                        ),
                        (
                            f"call {TARGET}.tensorboard_trace_handler(dir_name, worker_name): it writes an Ascend "
                            "profiling directory, not a gzipped .pt.trace.json"
                        ),
                    )
                )

    # -- findings ----------------------------------------------------------------------------

    def _report(self, actionable: list[tuple[cst.CSTNode, str, str]]) -> None:
        seen: set[int] = set()
        first = None
        self.blockers.sort(key=lambda b: _line(self.ctx, b[0]))
        for node, message, suggestion in self.blockers:
            if id(node) not in seen:
                seen.add(id(node))
                self.report(node, message, suggestion)
                first = first or node
        where = (
            self.ctx.position(first).start.line
            if first is not self.ctx.module
            else None
        )
        why = f" (line {where})" if where else ""
        for node, qualified, _ in actionable:
            if qualified == f"{SOURCE}.ProfilerActivity.CUDA" and id(node) not in seen:
                self.report(
                    node,
                    "`ProfilerActivity.CUDA` records nothing on Ascend; this file stays on torch.profiler",
                    f"once what keeps it there is resolved{why}, profile with {TARGET}.profile({NPU_ACTIVITIES})",
                )
        for call in self.stack_calls:
            metric = _stack_metric(call)
            if metric is not None:
                self.report(
                    call,
                    f'`export_stacks(..., "{string_value(metric)}")` exports CUDA time, which Ascend has none of',
                    f'with {TARGET}.profile, export_stacks(path, "self_npu_time_total")',
                )

    # -- the rewrite ------------------------------------------------------------------------

    def _rewrite(self, actionable: list[tuple[cst.CSTNode, str, str]]) -> None:
        retargeted = self._retarget_module_aliases(actionable)
        for node, qualified, target in actionable:
            root = _root(node)
            binding = (
                self.ctx.imports.bindings.get(root.value) if root is not None else None
            )
            through_name = binding is not None and normalize(binding) not in (
                None,
                SOURCE,
            )
            if through_name or (root is not None and root.value in retargeted):
                self._rename_member(node, qualified, target)
            else:
                self.replace(
                    node,
                    cst.parse_expression(target),
                    f"`{_short(qualified)}` -> `{target}`",
                )
        for statement in self.from_imports:
            self._retarget_from_import(statement)
        for call in self.stack_calls:
            metric = _stack_metric(call)
            if metric is not None:
                new = STACK_METRICS[string_value(metric)]
                self.replace(
                    metric,
                    lambda node, new=new: with_string_value(node, new),
                    f'export_stacks metric -> "{new}" (torch_npu.profiler)',
                    needs_torch_npu=False,
                )

    def _rename_member(self, node: cst.CSTNode, qualified: str, target: str) -> None:
        old, new = qualified.rsplit(".", 1)[1], target.rsplit(".", 1)[1]
        if isinstance(node, cst.Attribute) and old != new and node.attr.value == old:
            self.replace(
                node,
                lambda n, new=new: n.with_changes(attr=cst.Name(new)),
                f"`{_short(qualified)}` -> `{_short(target)}` ({TARGET})",
                needs_torch_npu=False,
            )

    def _retarget_module_aliases(self, actionable) -> set[str]:
        """`import torch.profiler as tp` / `from torch import profiler`: import torch_npu's
        module under the same name when every use through it maps and the statement
        imports nothing else; returns the names retargeted."""
        used: dict[str, list[bool]] = {}
        mapped_nodes = {id(node) for node, _, _ in actionable}
        for node, _ in self.uses:
            root = _root(node)
            if root is not None and root.value in self.module_aliases:
                used.setdefault(root.value, []).append(id(node) in mapped_nodes)
        done = set()
        for local, (statement, alias) in self.module_aliases.items():
            if not all(used.get(local, [])) or len(statement.names) != 1:
                continue
            if isinstance(statement, cst.Import):
                self._guarded_swap(
                    statement,
                    lambda s: s.with_changes(names=[s.names[0].with_changes(name=cst.parse_expression(TARGET))]),
                    f"`import torch.profiler` -> `import {TARGET}`",
                )
            else:
                self._guarded_swap(
                    statement,
                    lambda s: s.with_changes(module=cst.Name("torch_npu")),
                    "`from torch import profiler` -> `from torch_npu import profiler`",
                )
            done.add(local)
        return done

    def _guarded_swap(self, statement: cst.Import | cst.ImportFrom, change, message: str) -> None:
        """Replace the line of the import ``statement`` by ``try: <changed import>`` /
        ``except ModuleNotFoundError: <the import as it was>``: without torch_npu the
        file still imports and its CPU path runs, profiling included: torch's
        ``ProfilerActivity`` gets ``NPU`` as another name of ``CUDA`` there, so the
        activities mean what they meant in the original (docs/decisions.md)."""
        line = self.ctx.parent(statement)
        extra = _activity_alias(statement)
        self.replace(line, lambda node: _try_import(change(node.body[0]), node, extra), message, needs_torch_npu=False)

    def _retarget_from_import(self, statement: cst.ImportFrom) -> None:
        moving = [
            alias
            for alias, full, _ in from_import_names(statement)
            if mapped(normalize(full) or "")
        ]
        if not moving:
            return
        message = f"`from torch.profiler import ...` -> `from {TARGET} import ...`"
        if len(moving) == len(statement.names):
            self._guarded_swap(statement, lambda s: s.with_changes(module=cst.parse_expression(TARGET)), message)
            return
        # split: the moved names get a statement of their own, laid out like this one
        staying = [i for i, alias in enumerate(statement.names) if alias not in moving]
        last_comma = statement.names[-1].comma

        def keep(node: cst.ImportFrom) -> cst.ImportFrom:
            names = [node.names[i] for i in staying]
            names[-1] = names[-1].with_changes(comma=last_comma)
            return node.with_changes(names=names)

        before = statement.with_changes(names=[*moving[:-1], moving[-1].with_changes(comma=last_comma)])
        moved = before.with_changes(module=cst.parse_expression(TARGET))
        self.replace(statement, keep, message, needs_torch_npu=False)
        self.insert_after(
            statement,
            [_try_import(moved, cst.SimpleStatementLine(body=[before]), _activity_alias(before))],
            message,
            anchor=statement,
        )


def _activity_alias(statement: cst.Import | cst.ImportFrom) -> list[cst.SimpleStatementLine]:
    """What the ``except`` body adds after torch's import: ``ProfilerActivity.NPU`` as
    another name of ``ProfilerActivity.CUDA`` (torch's enum has no NPU member), through
    the name the statement binds; nothing where it binds no ProfilerActivity."""
    if isinstance(statement, cst.ImportFrom) and not isinstance(statement.names, cst.ImportStar):
        for alias in statement.names:
            if cst.helpers.get_full_name_for_node(alias.name) == "ProfilerActivity":
                local = alias.asname.name.value if alias.asname is not None else "ProfilerActivity"
                return [cst.parse_statement(f"{local}.NPU = {local}.CUDA\n")]
        if cst.helpers.get_full_name_for_node(statement.module) == "torch" and len(statement.names) == 1:
            local = statement.names[0].asname.name.value if statement.names[0].asname else "profiler"
            return [cst.parse_statement(NPU_ACTIVITY_IS_CUDA.format(module=f"{local}.") + "\n")]
        return []
    if isinstance(statement, cst.Import) and len(statement.names) == 1 and statement.names[0].asname is not None:
        local = statement.names[0].asname.name.value
        return [cst.parse_statement(NPU_ACTIVITY_IS_CUDA.format(module=f"{local}.") + "\n")]
    return []


def _try_import(new: cst.BaseSmallStatement, old_line: cst.SimpleStatementLine,
                extra: list[cst.SimpleStatementLine] = ()) -> cst.Try:
    """``try: new`` / ``except ModuleNotFoundError: <old_line>`` (and ``extra``) at the
    place of ``old_line``."""
    return cst.Try(
        body=cst.IndentedBlock(body=[old_line.with_changes(body=[new], leading_lines=())]),
        handlers=[
            cst.ExceptHandler(
                type=cst.Name(GUARD_EXCEPTION),
                body=cst.IndentedBlock(
                    body=[old_line.with_changes(leading_lines=()), *extra],
                    header=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(GUARD_COMMENT)),
                ),
            )
        ],
        leading_lines=old_line.leading_lines,
    )


def _line(ctx, node: cst.CSTNode) -> int:
    return 0 if isinstance(node, cst.Module) else ctx.position(node).start.line


def _root(node: cst.CSTNode) -> cst.Name | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


def _short(qualified: str) -> str:
    """``torch.profiler.ProfilerActivity.CUDA`` -> ``ProfilerActivity.CUDA``."""
    for prefix in (SOURCE + ".", TARGET + "."):
        if qualified.startswith(prefix):
            return qualified[len(prefix) :] if qualified.count(".") > 2 else qualified
    return qualified


def _stack_metric(call: cst.Call) -> cst.SimpleString | None:
    """The CUDA metric string passed to ``export_stacks(path, metric)``, if any."""
    arg = call_arg(call, "metric", 1)
    if (
        arg is not None
        and isinstance(arg.value, cst.SimpleString)
        and string_value(arg.value) in STACK_METRICS
    ):
        return arg.value
    return None
