"""Migrates one file: prefilter, one parse, one batched pass of every selected
rule, one transform that applies their edits, and the bookkeeping around it.

This module never imports torch. It is what each worker process runs.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import MetadataWrapper

from npu_migrate.configs import templates
from npu_migrate.pipeline import file_roles, limits
from npu_migrate.pipeline.entry_points import is_named_entry
from npu_migrate.pipeline.file_roles import (
    TEMPLATE_SUGGESTION,
    is_test_path,
    report_only,
    template_place,
)
from npu_migrate.pipeline.model import TEMPLATE, FileResult, Finding, Fix
from npu_migrate.pipeline.registry import rule_ids, rules_for
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import RULE, describe
from npu_migrate.pipeline.target import named as named_target
from npu_migrate.python import (
    aware_options,
    cannot_run,
    compared,
    cuda_backend,
    cuda_only,
    cuda_workarounds,
    elision,
    imports,
    kernel_classes,
    lossless,
    npu_aware,
    quantized,
    set_epoch,
    unread,
    walk,
)
from npu_migrate.python.apply import EditApplier
from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import last_name
from npu_migrate.python.names import (
    BindingCollector,
    ImportTableResolver,
    ScopeResolver,
    ambiguous_roots,
    build_import_table,
    star_bound_roots,
)
from npu_migrate.python.never_run import never_run_spans
from npu_migrate.python.positions import Starts
from npu_migrate.python.prefilter import Prefilter
from npu_migrate.python.records import Edit, FindingRecord
from npu_migrate.python.source import SourceError, decode
from npu_migrate.python.suppression import (
    is_suppressed,
    may_have_bad_codes,
    parse,
    suppressions,
)
from npu_migrate.python.type_hints import in_annotation
from npu_migrate.python.unread import UNREAD_RULE

#: ``import torch...`` / ``from torch... import`` anywhere in a file (functions too).
#: Any import statement (a form feed may stand before one). A file with none is plain
#: data (an mmcv/mmengine config): it never gets `import torch_npu`.
_IMPORTS_ANYTHING = re.compile(r"^[ \t\f]*(?:import|from)[ \t]+\w", re.MULTILINE)
IMPORT_RULE = "NPU100"  # adds `import torch_npu`; documented in rules/device/
NPU_AWARE_RULE = "NPU010"  # code that already handles NPU is left alone
KERNEL_GATE_RULE = "NPU011"  # CUDA tests in front of CUDA-only code stay CUDA tests
#: Rules whose edits can be the CUDA test of a gate (`torch.cuda.X`, `x.is_cuda`, `"cuda"`).
_TEST_REWRITES = ("NPU101", "NPU103", "NPU104")
_VALUE_TESTS = ("NPU103", "NPU104")
#: rewrites of CUDA device code that another backend's implementation keeps (cuda_backend.py)
_IMPORT_EDITS = frozenset({"NPU100", "NPU701"})
SUPPRESSION_RULE = RULE  # suppression comments with codes that name no rule
#: the rule that reports a file only a newer Python parses (rules/core/npu013_newer_python.py)
NEWER_PYTHON_RULE = "NPU013"
#: Rules the engine applies itself (documented in rules/core/); NPU100 is a visitor.
ENGINE_RULES = (NPU_AWARE_RULE, KERNEL_GATE_RULE, SUPPRESSION_RULE)
ANNOTATION_PREFIX = "# npu-migrate: "

_NESTED_IMPORT = re.compile(r"^[ \t]+(?:import|from)[ \t]", re.MULTILINE)
#: A file about a device (see ``Rule.only_in_device_files``).
_DEVICE_FILE = re.compile(r"\b(?:cuda|npu|is_npu|torch_npu)\b")


@functools.cache
def _prefilter(rule_ids: tuple[str, ...]) -> Prefilter:
    rules = rules_for("python")
    followers = [rid for rid in rule_ids if rules[rid].runs_with_other_rules]
    return Prefilter({rid: rules[rid].triggers for rid in rule_ids}, followers)


def migrate_source(path: str, data: bytes, settings: Settings = Settings()) -> FileResult:
    """Never raises for bad input: problems become ``FileResult.error``.

    A template (a file under a cookiecutter/copier ``{{ }}`` path part or a Helm chart's
    ``templates/``, or one that is no Python as written and holds ``{{ }}``/``{% %}``
    markers) is never rewritten, as config templates are not (docs/decisions.md): what
    the rules would rewrite is reported, read from the file as it is where it parses,
    else with its template actions blanked out; a template that does not read even
    then is skipped with a note, not an error."""
    result, syntax = _migrate_python(path, data, settings)
    place = template_place(path)
    if place is None and not (syntax and templates.has_markers(data)):
        return result
    why = f"{TEMPLATE}{place})" if place else TEMPLATE + "{{ }} or {% %} markers; not valid Python as written)"
    if result.error is not None:
        result, _ = _migrate_python(path, templates.neutralize(data), settings)
        if result.error is not None:
            return FileResult(path=path, skipped=why)
    result = report_only(result, "template", TEMPLATE_SUGGESTION)
    result.new_source = None
    result.skipped = why
    return result


def _migrate_python(path: str, data: bytes, settings: Settings) -> tuple[FileResult, bool]:
    """The file's result, and whether it failed on its syntax."""
    result = FileResult(path=path)
    if len(data) > limits.MAX_PYTHON_BYTES:
        result.error = (f"{path}:1: {len(data) / (1 << 20):.1f} MB of Python, larger than the "
                        f"{limits.MAX_PYTHON_BYTES >> 20} MB npu-migrate parses in one piece; skipped")
        return result, False
    try:
        try:
            _migrate(result, data, settings, elide=settings.prefilter)
        except elision.ElisionError:  # an edit swallowed a placeholder: do it the long way
            result = FileResult(path=path)
            _migrate(result, data, settings, elide=False)
    except SourceError as exc:
        result.error = str(exc)
        return result, True
    except cst.ParserSyntaxError as exc:
        result.error = _syntax_error(path, data, exc)
        return result, True
    except RecursionError:
        result.error = f"{path}:1: too deeply nested for npu-migrate's parser (libcst); left unchanged"
    except MemoryError:
        result = FileResult(path=path, error=f"{path}:1: {limits.out_of_memory(data)}")
    return result, False


#: CPython's own limits: no Python version accepts a file past them, however new.
_LIMITS = ("too many nested parentheses", "too many levels of indentation", "too many indentation levels")


def python_ast(path: str, data: bytes) -> ast.Module | None:
    """CPython's parse of the file, or None where it rejects the file's grammar (it may
    be written for a newer Python than the one running npu-migrate: libcst, which
    knows newer grammars, decides then). Where CPython rejects the file for what no
    Python version accepts, its verdict is final, with its own message
    (:class:`SourceError`), and the file never reaches libcst: nesting past its
    limits (over 200 brackets, on which libcst's native parser has crashed), bad
    indentation, a NUL byte, and trees too deep to build (a 5,000-term operator
    chain, which libcst takes seconds to give up on)."""
    try:
        return ast.parse(data)
    except SyntaxError as exc:  # IndentationError and TabError too
        if not (isinstance(exc, IndentationError) or exc.msg.startswith(_LIMITS) or exc.lineno is None):
            return None
        line, col = (exc.lineno, exc.offset) if exc.lineno else _null_byte(data)
        raise SourceError(f"{path}:{line}:{col or 1}: syntax error: {exc.msg}") from None
    except ValueError as exc:  # "source code string cannot contain null bytes" (some Python versions)
        line, col = _null_byte(data)
        raise SourceError(f"{path}:{line}:{col}: syntax error: {exc}") from None
    except RecursionError as exc:
        raise SourceError(f"{path}:1: too deeply nested: Python cannot parse it either ({exc})") from None
    except MemoryError:  # a memory cap, not nesting (issue 29: a 12 MB file was called "too deeply nested")
        raise SourceError(f"{path}:1: {limits.out_of_memory(data)}") from None


def _syntax_error(path: str, data: bytes, exc: cst.ParserSyntaxError) -> str:
    """One line, ``file:line:col: syntax error: ...``. CPython's parser gives the
    location users know from tracebacks; libcst's is the fallback."""
    try:
        ast.parse(data)
    except SyntaxError as syntax:
        if syntax.lineno:
            return f"{path}:{syntax.lineno}:{syntax.offset or 1}: syntax error: {syntax.msg}"
    message = str(exc.message).splitlines()[0] if exc.message else "invalid syntax"
    return f"{path}:{exc.raw_line}:{exc.raw_column + 1}: syntax error: {message} (the code is valid Python; libcst cannot parse it)"


def _null_byte(data: bytes) -> tuple[int, int]:
    """Line and column of the first NUL byte (CPython does not say where it is)."""
    at = data.find(b"\0")
    if at < 0:
        return 1, 1
    return data.count(b"\n", 0, at) + 1, at - data.rfind(b"\n", 0, at)


def _reduce(data: bytes, text: str, needed: list[str], tree: ast.Module) -> elision.Reduced | None:
    """The file with the definitions no needed rule can act on left out (None: parse it all)."""
    rules = rules_for("python")
    triggers: list = []
    names: list[str] = []
    for rule_id in needed:
        words = rules[rule_id].local_words()
        if words is None:
            return None
        triggers.extend(words)
        names.extend(rules[rule_id].local_names)
    return elision.reduce(data, text, tree, triggers, names)


def _starts(tree: ast.Module | None, reduced: elision.Reduced | None) -> Starts | None:
    """Where the parsed module's statements start (see npu_migrate/python/positions.py)."""
    if tree is None:
        return None
    starts = Starts.of(tree)
    return starts if reduced is None else starts.moved(reduced.reduced_line)


#: the rule that installs the runtime into entry points (named ones always)
RUNTIME_RULE = "NPU701"


def _migrate(result: FileResult, data: bytes, settings: Settings, elide: bool) -> None:
    path = result.path
    text = decode(path, data)
    tree = python_ast(path, data)  # what CPython rejects for good is reported here
    rules = rules_for("python")
    active = tuple(rid for rid in rules if settings.selection.active(rid, path, rules[rid].opt_in))
    needed = _prefilter(active).rules_needed(text) if settings.prefilter else list(active)
    named_entry = is_named_entry(path, settings.facts)
    if named_entry and RUNTIME_RULE in active and RUNTIME_RULE not in needed:
        # an entry point the user named whose training is all in imported modules
        # (tools/train.py calling mylib.trainer.run): NPU701 is the one rule it needs
        needed = [*needed, RUNTIME_RULE]
        elide = False
    bad_codes = _bad_suppressions(text, active)
    if not needed:
        if tree is None:
            cst.parse_module(data)  # raises ParserSyntaxError if the file is broken for libcst too
        result.findings = bad_codes
        return
    reduced = _reduce(data, text, needed, tree) if elide and tree is not None else None
    parsed = lossless.protect(reduced.data if reduced is not None else data)
    module = cst.parse_module(parsed.data)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    table = build_import_table(module, bool(_NESTED_IMPORT.search(text)), star_bound_roots(tree))
    visitor_ids = [rid for rid in needed if rid not in ENGINE_RULES]

    run = functools.partial(_run_rules, path, text, wrapper, table=table, settings=settings,
                            rule_ids=visitor_ids, reduced=reduced, starts=_starts(tree if elide else None, reduced),
                            tree=tree,
                            active=frozenset(active))
    ctx = run(ImportTableResolver(table))
    if ctx is None:  # the import table could not vouch for some name: redo exactly
        ctx = run(ScopeResolver(wrapper, table.star_bound))

    edits, findings = _filter(ctx, active, text, path)
    if tree is None and edits:
        # CPython rejected the grammar and libcst did not: a file for a newer Python, on which
        # the ast-based analyses that prove an edit safe cannot run (NPU013)
        if NEWER_PYTHON_RULE in active:
            findings.append(FindingRecord(
                NEWER_PYTHON_RULE, edits[0].anchor,
                f"the Python {sys.version_info[0]}.{sys.version_info[1]} npu-migrate runs on rejects this file's "
                "grammar (written for another, usually newer, Python): the analyses that prove an edit safe cannot "
                "read it here; left unchanged",
                "run npu-migrate under the Python the project is written for (npu-migrate installs on 3.10 and "
                "later) to migrate this file"))
        edits = []
        ctx.uses_npu_unimported = None
    if settings.annotate:
        edits.extend(_annotations(ctx, findings))
    if not edits and ctx.uses_npu_unimported is None:
        result.findings = _one_per_place([*_to_findings(ctx, findings), *bad_codes])
        return

    new_module = module.visit(EditApplier(edits, _paths_to(ctx, edits)))
    fixes = [_to_fix(ctx, e) for e in edits if not e.rule.startswith("annotate:")]
    new_module, import_fix = _add_imports(ctx, new_module, edits, active)
    if import_fix is not None:
        fixes.append(import_fix)
    generated = parsed.restore(new_module.bytes)
    new_source = generated if reduced is None else reduced.restore(generated)
    result.findings = _one_per_place([*_to_findings(ctx, findings), *bad_codes])
    if new_source != data:
        result.new_source = new_source
        result.fixes = _one_per_place(fixes)


def _run_rules(path, text, wrapper, resolver, *, table, settings, rule_ids, reduced, starts, tree,
               active) -> FileContext | None:
    ctx = FileContext(path=path, text=text, wrapper=wrapper, imports=table, resolver=resolver,
                      facts=settings.facts, reduced=reduced, statement_starts=starts, python_tree=tree,
                      active=active, target=named_target(settings.target))
    rules = rules_for("python")
    visitors = [rules[rid](ctx) for rid in rule_ids]
    bindings = BindingCollector()
    walk.visit_batched(wrapper.module, [*visitors, bindings], ctx.before_visit, ctx.after_leave)
    if not resolver.exact and ambiguous_roots(resolver.roots_used, table, bindings.bound):
        return None
    for visitor in visitors:
        visitor.leave_file()
    return ctx


def _bad_suppressions(text: str, active: tuple[str, ...]) -> list[Finding]:
    """NPU001: codes in suppression comments that name no rule (see suppression.py)."""
    if SUPPRESSION_RULE not in active or not may_have_bad_codes(text):
        return []
    found = parse(text, rule_ids())
    return [
        Finding(bad.line, bad.col, SUPPRESSION_RULE, *describe(bad.code, bad.comment), bad.line, bad.end_col)
        for bad in found.bad
        if not is_suppressed(found.lines, bad.line, SUPPRESSION_RULE)
    ]


def _torch_npu_fallback_lines(ctx: FileContext) -> list[tuple[int, int]]:
    """Lines of the ``except`` bodies of top-level ``try: import torch_npu`` guards
    (NPU100's, npu_migrate/python/imports.py, or the project's own): code for a machine
    without torch_npu, which no rule rewrites (``from torch import cuda as tc`` there
    is the CPU fallback, not CUDA code to migrate)."""
    spans = []
    for statement in ctx.module.body:
        if isinstance(statement, cst.Try) and any(
                "torch_npu" in imports.imported_modules(s) for s in statement.body.body):
            for handler in statement.handlers:
                where = ctx.position(handler)
                spans.append((where.start.line, where.end.line))
    if imports.GUARD_COMMENT in ctx.text:
        # and the tool's own guard wherever it stands (beside a function-local `import torch`)
        class _Handlers(cst.CSTVisitor):
            def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
                if imports.is_cpu_path_handler(node):
                    where = ctx.position(node)
                    spans.append((where.start.line, where.end.line))

        ctx.module.visit(_Handlers())
    return spans


def _filter(ctx: FileContext, active, text: str, path: str) -> tuple[list[Edit], list[FindingRecord]]:
    """Drop what is suppressed, what sits in tests that never run (``never_run``), the
    CUDA tests that gate CUDA-only code (NPU011), and what sits in code that already
    handles NPU (NPU010)."""
    table = suppressions(text)

    def line(node: cst.CSTNode) -> int:
        return ctx.position(node).start.line

    # code that already falls back to torch_npu, and tests that an unconditional skip
    # switches off: nothing there is edited or reported
    left_alone = _torch_npu_fallback_lines(ctx) + never_run_spans(ctx)

    def kept(node: cst.CSTNode, rule: str) -> bool:
        number = line(node)
        return not is_suppressed(table, number, rule) and not any(a <= number <= b for a, b in left_alone)

    edits = [e for e in ctx.edits if kept(e.anchor, e.rule) and not in_annotation(ctx, e.node)]
    # (a rule may report under the id of another, which must be selected too)
    findings = [f for f in ctx.findings if f.rule in active and kept(f.node, f.rule) and not in_annotation(ctx, f.node)]
    value_tests = [e for e in edits if e.rule in _VALUE_TESTS]
    edits, backend_findings = _backend_regions(ctx, edits, line)
    whole = {id(owner) for owner in backend_findings.pop("whole")}
    if whole:
        findings = [f for f in findings if not _in_owner(ctx, f.node, whole)]
    if id(ctx.module) in whole or ((edits or ctx.uses_npu_unimported) and cuda_backend.file_region(ctx) is not None):
        # the whole file is left alone (another backend's module, one written for Ascend, a
        # kernel module): no import of torch_npu either (reported with the file's other edits,
        # or on its own where that import was the only one)
        if id(ctx.module) not in whole and edits:
            rule, message = cuda_backend.file_region(ctx)
            findings.append(FindingRecord(rule, edits[0].anchor, message, "nothing to migrate here"))
        edits = []
        ctx.uses_npu_unimported = None
    findings += [f for f in backend_findings.pop("found") if f.rule in active and not is_suppressed(table, line(f.node), f.rule)]
    edits, unrunnable_findings = _functions_that_cannot_run(ctx, edits, line)
    edits, wrapper_findings = _kernel_wrappers(ctx, edits, line)
    wrapper_findings = unrunnable_findings + wrapper_findings
    edits, gate_findings = _kernel_gates(ctx, edits, line)
    gate_findings = wrapper_findings + gate_findings
    edits, scope_findings = _cuda_only_scopes(ctx, edits, line)
    edits, tensorrt_findings = _tensorrt_blocks(ctx, edits, line)
    scope_findings += tensorrt_findings
    gate_findings += scope_findings
    edits = cuda_workarounds.contiguous_only_branches(ctx, edits)
    edits, subclass_findings = kernel_classes.kernel_classes(ctx, edits, line)
    gate_findings += subclass_findings
    edits, argument_findings = _device_arguments_of_kernels(ctx, edits, line)
    gate_findings += argument_findings
    edits, sink_findings = _devices_into_kernels(ctx, edits, line)
    gate_findings += sink_findings
    edits, twin_findings = _functions_with_ascend_twins(ctx, edits, line)
    edits, class_findings = _classes_alike(ctx, value_tests, edits, line)
    gate_findings += class_findings
    edits, chain_findings = _partial_chains(ctx, edits, line)
    if NPU_AWARE_RULE in active:
        findings += [f for f in chain_findings + twin_findings if not is_suppressed(table, line(f.node), NPU_AWARE_RULE)]
    if KERNEL_GATE_RULE in active:
        findings += [f for f in gate_findings if not is_suppressed(table, line(f.node), KERNEL_GATE_RULE)]

    edited = npu_aware.edited_nodes(ctx, [e.anchor for e in edits] + [e.node for e in edits])
    aware_lines: dict[int, tuple[cst.CSTNode, cst.CSTNode, cst.CSTNode | None]] = {}
    chains: dict = {}  # what each run of adjacent if statements says, found once

    def outside_aware_chain(node: cst.CSTNode) -> bool:
        found = npu_aware.aware_chain(ctx, node, edited, chains)
        if found is None:
            return True
        aware_lines.setdefault(line(node), (node, *found))
        return False

    edits = [e for e in edits if outside_aware_chain(e.anchor)]
    findings = [f for f in findings if outside_aware_chain(f.node)]
    flags = _aware_flags(ctx, {line(e.anchor) for e in edits})
    if flags:
        def outside_flag(node: cst.CSTNode) -> bool:
            number = line(node)
            held = next((flag for (first, last), flag in flags.items() if first <= number <= last), None)
            if held is None:
                return True
            aware_flag_lines.setdefault(number, (node, held))
            return False

        aware_flag_lines: dict[int, tuple[cst.CSTNode, tuple[str, int]]] = {}
        edits = [e for e in edits if outside_flag(e.anchor)]
        findings = [f for f in findings if outside_flag(f.node)]
    else:
        aware_flag_lines = {}
    edits, findings = _aware_options(ctx, edits, findings, line)
    rules = rules_for("python")
    device_only = {rid for rid in active if rules[rid].only_in_device_files}
    if device_only and not _DEVICE_FILE.search(text) and not any(e.needs_torch_npu for e in edits if e.rule not in device_only):
        edits = [e for e in edits if e.rule not in device_only]
        findings = [f for f in findings if f.rule not in device_only]
    edits, held_gates = _gates_over_left_cuda(ctx, edits, findings, line)
    edits, held_flags = _flags_over_left_crash(ctx, edits, findings)
    held_gates += held_flags
    if KERNEL_GATE_RULE in active:
        findings += [f for f in held_gates if not is_suppressed(table, line(f.node), KERNEL_GATE_RULE)]
    edits, nccl_findings = _devices_chosen_for_nccl(ctx, edits, line)
    if KERNEL_GATE_RULE in active:
        findings += [f for f in nccl_findings if not is_suppressed(table, line(f.node), KERNEL_GATE_RULE)]
    edits = _calls_keeping_cuda(ctx, edits, findings, line)
    if edits and any(f.rule == quantized.QUANTIZE_RULE for f in findings):
        held, findings = quantized.quantized_scopes(ctx, findings)
        edits = [e for e in edits if not any(a <= line(e.anchor) <= b for a, b in held)]
    # a module that cannot be imported on Ascend: its edits serve nothing until that import
    # is ported (the findings that say how to port it stay); one of vLLM's engine: its
    # devices are the engine's
    blocker, advice = (cuda_backend.unimportable_module(ctx) if edits else None), _PORT_IMPORT_FIRST
    if edits and blocker is None:
        blocker, advice = cuda_backend.vllm_engine_module(ctx), cuda_backend.VLLM_ENGINE_ADVICE
    if blocker is not None:
        if KERNEL_GATE_RULE in active and not is_suppressed(table, line(edits[0].anchor), KERNEL_GATE_RULE):
            findings.append(FindingRecord(KERNEL_GATE_RULE, edits[0].anchor, blocker, advice))
        edits = []
        ctx.uses_npu_unimported = None
    if edits and any(f.rule == _LIGHTNING_RULE for f in ctx.findings):
        edits, placed = _left_to_lightning(ctx, edits, line)
        if placed is not None and not is_suppressed(table, line(placed.node), _LIGHTNING_RULE):
            findings.append(placed)
    if edits and (patcher := ctx.facts.patched_by(path)) is not None:
        edits, patched = _left_to_transfer_to_npu(ctx, edits, patcher, line)
        if patched is not None and NPU_AWARE_RULE in active and not is_suppressed(table, line(patched.node), NPU_AWARE_RULE):
            findings.append(patched)
    edits, held_statements = _statements_left_half(ctx, edits, findings, table, line)
    findings += held_statements
    if UNREAD_RULE in active and (edits or findings):
        edits, findings = _left_unread(ctx, edits, findings, table, line)
    edits = _device_fstrings(ctx, edits)
    edits = _with_requirements(edits)
    dependent = {rid for rid in {e.rule for e in edits} if rules[rid].only_with_other_fixes}
    named = is_named_entry(path, ctx.facts)  # the user said so: no other fix is needed
    if dependent and not named and not any(e.needs_torch_npu for e in edits if e.rule not in dependent):
        edits = [e for e in edits if e.rule not in dependent]
    if NPU_AWARE_RULE in active:
        for number, (node, chain, test) in sorted(aware_lines.items()):
            if not is_suppressed(table, number, NPU_AWARE_RULE):
                shown = " ".join(ctx.module.code_for_node(test).split()) if test is not None else ""
                where = f"the chain's NPU test is `{shown}`; " if shown and len(shown) <= 80 else ""
                findings.append(
                    FindingRecord(
                        NPU_AWARE_RULE,
                        node,
                        f"CUDA code in {'a conditional expression' if isinstance(chain, cst.IfExp) else 'an if/elif chain'} "
                        "that already handles the NPU; left unchanged",
                        f"nothing to migrate here: {where}check that its NPU branch is the one taken on Ascend",
                    )
                )
        for number, (node, (flag, chain_test)) in sorted(aware_flag_lines.items()):
            statement = ctx.enclosing_statement(node)
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and statement.body else None
            if isinstance(small, cst.Assign):
                node = small.targets[0].target  # the flag, where the reader looks
            elif isinstance(small, cst.AnnAssign):
                node = small.target
            if not is_suppressed(table, number, NPU_AWARE_RULE):
                findings.append(
                    FindingRecord(
                        NPU_AWARE_RULE,
                        node,
                        f"`{flag}` is tested in an if/elif chain that already tests the NPU; "
                        "its CUDA test is left unchanged, so on NPU that chain takes its NPU branch",
                        # (the chain's NPU test goes in the suggestion: messages are compared across
                        # runs, and a second run may find another test of the NPU first)
                        f"nothing to migrate here: the chain's NPU test is `{chain_test}`; check that its branch "
                        "is the one taken on Ascend",
                    )
                )
    if any(f.rule == _SET_EPOCH_RULE for f in findings) and any(set_epoch.adds_set_epoch(e) for e in edits):
        # The written file will call `.set_epoch(` (NPU510/511 shard a loader in the same
        # run): the next run leaves its samplers to it, so this one says nothing either
        # (NPU502's own rule for its and NPU501's inserts; rules run in id order, so it
        # cannot see the later rules' edits itself).
        findings = [f for f in findings if f.rule != _SET_EPOCH_RULE]
    return edits, findings


_SET_EPOCH_RULE = "NPU502"


#: findings that leave a CUDA value or call in place (an unproven device string, a
#: torch.cuda API with no NPU counterpart, a ``torch.cuda.amp`` name NPU301 cannot rewrite:
#: open_lm's ``torch.cuda.amp.autocast if torch.cuda.is_available() else
#: torch.cpu.amp.autocast``, whose rewritten test alone picks CUDA's autocast on Ascend)
_LEFT_CUDA = frozenset({"NPU108", "NPU102", "NPU301"})
#: of those, the ones that crash on the NPU where the original ran (no NPU counterpart)
_LEFT_CRASH = frozenset({"NPU102"})
#: torch's CUDA library choices, which raise when set on a build without that library
_CUDA_LIBRARY_SETTERS = frozenset({"torch.backends.cuda.preferred_blas_library",
                                   "torch.backends.cuda.preferred_linalg_library"})


def _flags_over_left_crash(ctx: FileContext, edits: list[Edit],
                           findings: list[FindingRecord]) -> tuple[list[Edit], list[FindingRecord]]:
    """A flag that holds a CUDA test and guards, through ``and``, a torch.cuda call with no
    NPU counterpart keeps its CUDA test: Qwen's ``SUPPORT_CUDA = torch.cuda.is_available()``
    then ``SUPPORT_FP16 = SUPPORT_CUDA and torch.cuda.get_device_capability(0)[0] >= 7``
    (MoE-LLaVA, held-out round 26), rewritten, called CUDA's capability on Ascend when the
    module was imported, and the import failed. The flag's assignment is left, reported."""
    crashes = [f for f in findings if _left_kind(ctx, f) in _LEFT_CRASH]
    if not crashes or not edits:
        return edits, []
    held: dict[int, cst.CSTNode] = {}
    for finding in crashes:
        child = finding.node
        for ancestor in ctx.ancestors(finding.node):
            if isinstance(ancestor, cst.BaseStatement):
                break
            if isinstance(ancestor, cst.BooleanOperation) and isinstance(ancestor.operator, cst.And) \
                    and child is ancestor.right and isinstance(ancestor.left, cst.Name):
                for assignment in ctx.assignments(ancestor.left, ancestor.left.value) or ():
                    statement = ctx.enclosing_statement(getattr(assignment, "node", None)) \
                        if isinstance(getattr(assignment, "node", None), cst.Name) else None
                    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
                        held[id(statement)] = statement
            child = ancestor
    if not held:
        return edits, []
    kept, reported = [], {}
    for edit in edits:
        statement = ctx.enclosing_statement(edit.anchor)
        if edit.rule in _TEST_REWRITES and statement is not None and id(statement) in held:
            reported.setdefault(id(statement), edit)
        else:
            kept.append(edit)
    found = [FindingRecord(KERNEL_GATE_RULE, edit.anchor,
                           "this flag's CUDA test guards a torch.cuda call with no NPU counterpart (reported there, "
                           "through `and`); left as a CUDA test, so on NPU that call is skipped as before",
                           "port that call first (branch on the feature it asks for), then rewrite the flag")
             for edit in reported.values()]
    return kept, found


def _left_kind(ctx: FileContext, finding: FindingRecord) -> str:
    """The finding's rule, where a reported ``torch.version.cuda`` (NPU602) counts as an
    unproven CUDA value (NPU108): it is None on Ascend, so code that asserts or branches on
    it (open-instruct's ``assert torch.version.cuda is not None`` in a GPU test) keeps
    needing CUDA. Outside tests such a value does not hold a program's own device test."""
    if finding.rule == "NPU602" and ctx.qualified_name(finding.node) == "torch.version.cuda":
        return "NPU108"
    if finding.rule == "NPU602" and ctx.qualified_name(finding.node) in _CUDA_LIBRARY_SETTERS:
        # `torch.backends.cuda.preferred_blas_library("cublaslt")` raises on the CPU build
        # torch_npu runs on: as a torch.cuda call with no NPU counterpart, it keeps its CUDA
        # test (ludwig's get_torch_device, run at import: held-out round 26)
        call = ctx.parent(finding.node)
        if isinstance(call, cst.Call) and call.func is finding.node and call.args:
            return "NPU102"
    return finding.rule


def _gate_span(ctx: FileContext, node: cst.CSTNode) -> tuple[cst.CSTNode, tuple[int, int], frozenset] | None:
    """``(test, (first, last), rules)`` when ``node`` is part of a test that decides whether
    other code runs, with the findings (``rules``) inside ``first..last`` that hold it:

    * a decorator (``@pytest.mark.skipif(not torch.cuda.is_available(), ...)``): the
      decorated test, from its first decorator (a ``parametrize("device", ["cuda"])``);
    * a module's ``pytestmark``: the module;
    * in a test module, an ``if`` that skips (``pytest.skip``, ``self.skipTest``, ``return``)
      inside a test function: the whole test with its decorators (llm-foundry's ``if device
      == 'cuda' and not torch.cuda.is_available(): pytest.skip()`` under a parametrized
      ``'cuda'``); another ``if``: its body (for ``if not ...:``, the rest of the block);
    * elsewhere, an ``if``: its body, held only by a torch.cuda call that has no NPU
      counterpart (NPU102: llm-foundry's ``torch.cuda.nccl.version()``). A program's own
      ``if torch.cuda.is_available():`` chooses its device; one unproven value (NPU108)
      must not leave the whole block on CUDA.
    """
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Decorator):
            owner = ctx.parent(ancestor)
            return ancestor.decorator, _with_decorators(ctx, owner), _LEFT_CUDA
        if isinstance(ancestor, cst.IfExp) and child is ancestor.test:
            # `device = "cuda" if torch.cuda.is_available() else "cpu"` whose "cuda" stays (reported:
            # it goes to mamba_ssm's model): a rewritten test alone would pick "cuda" on Ascend
            value = ctx.position(ancestor.body)
            return ancestor.test, (value.start.line, value.end.line), _LEFT_CUDA
        if isinstance(ancestor, cst.If) and child is ancestor.test:
            body = ctx.position(ancestor.body)
            test = ancestor.test
            testing = is_test_path(ctx.path)
            kinds = _LEFT_CUDA if testing else _LEFT_CRASH
            if testing and _skips(ancestor):
                function = next((a for a in ctx.ancestors(ancestor) if isinstance(a, cst.FunctionDef)), None)
                if function is not None:
                    return ancestor.test, _with_decorators(ctx, function), kinds
            if cuda_backend.negative_test(test) and ancestor.orelse is None:
                holder = ctx.parent(ancestor)
                end = ctx.position(holder).end.line if holder is not None else body.end.line
                return ancestor.test, (body.end.line + 1, end), kinds
            return ancestor.test, (body.start.line, body.end.line), kinds
        if isinstance(ancestor, cst.SimpleStatementLine):
            small = ancestor.body[0] if ancestor.body else None
            if (isinstance(small, cst.Assign) and isinstance(ctx.parent(ancestor), cst.Module)
                    and any(isinstance(t.target, cst.Name) and t.target.value == "pytestmark" for t in small.targets)):
                return small, (1, len(ctx.text.splitlines())), _LEFT_CUDA
            return None
        if isinstance(ancestor, cst.BaseCompoundStatement):
            return None
        child = ancestor
    return None


def _with_decorators(ctx: FileContext, owner: cst.CSTNode) -> tuple[int, int]:
    where = ctx.position(owner)
    first = min([ctx.position(d).start.line for d in getattr(owner, "decorators", ())] + [where.start.line])
    return first, where.end.line


def _skips(branch: cst.If) -> bool:
    """The ``if``'s body ends by skipping the test: ``pytest.skip(...)``, ``self.skipTest(...)``,
    ``return``."""
    body = branch.body.body if isinstance(branch.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else None
    if isinstance(small, cst.Return):
        return True
    return (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
            and last_name(small.value.func) in ("skip", "skipTest"))


#: the rules whose edits put code on the NPU device (not imports, not backends)
_DEVICE_EDITS = frozenset({"NPU101", "NPU103", "NPU104"})


def _devices_chosen_for_nccl(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """A device in a branch that a test of the NCCL backend chooses stays CUDA's where that
    test stays NCCL's: OLMo-core's ``torch.device("cuda") if "nccl" in backend else
    torch.device("cpu")``, whose ``"cuda:nccl,cpu:gloo"`` parameter is reported, not
    rewritten (NPU201). Rewritten alone, the device would pair the NPU with NCCL; where
    NPU201 rewrites the test's ``"nccl"`` (to ``"hccl"``), the device moves with it."""
    if "nccl" not in ctx.text:
        return edits, []
    rewritten = {id(e.node) for e in edits} | {id(e.anchor) for e in edits}
    kept, found, reported = [], [], set()
    for edit in edits:
        test = _nccl_test(ctx, edit.anchor, rewritten) if edit.rule in _DEVICE_EDITS else None
        if test is None:
            kept.append(edit)
            continue
        if id(test) not in reported:
            reported.add(id(test))
            shown = " ".join(ctx.module.code_for_node(test).split())
            found.append(FindingRecord(KERNEL_GATE_RULE, edit.anchor,
                                       f"a device chosen by a test of the NCCL backend (`{shown[:80]}`), which stays "
                                       "NCCL's (NPU201); left CUDA's so that the two agree",
                                       "move both together: test for 'hccl' (or the device type) and name 'npu' here"))
    return kept, found


def _nccl_test(ctx: FileContext, node: cst.CSTNode, rewritten: set[int]) -> cst.CSTNode | None:
    """The test of the ``if``/conditional expression around ``node`` (within its function)
    that holds a ``"nccl"`` string no edit rewrites, if any."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Module)):
            return None
        if isinstance(ancestor, (cst.If, cst.IfExp)) and child is not ancestor.test:
            literals = [s for s in _strings_of(ancestor.test) if "nccl" in s.value.lower()]
            if literals and not any(id(s) in rewritten or any(id(a) in rewritten for a in ctx.ancestors(s))
                                    for s in literals):
                return ancestor.test
        child = ancestor
    return None


def _strings_of(node: cst.CSTNode) -> list[cst.SimpleString]:
    found: list[cst.SimpleString] = []

    class _Strings(cst.CSTVisitor):
        def visit_SimpleString(self, string: cst.SimpleString) -> None:
            found.append(string)

    node.visit(_Strings())
    return found


def _gates_over_left_cuda(ctx: FileContext, edits: list[Edit], findings: list[FindingRecord],
                          line) -> tuple[list[Edit], list[FindingRecord]]:
    """A CUDA test is rewritten only when the code it guards is migrated too: lerobot's
    ``@pytest.mark.skipif(not torch.cuda.is_available())`` over a test that keeps
    ``DeviceProcessorStep(device="cuda")`` (reported, NPU108) would stop skipping on
    Ascend and fail there. Such a test stays a CUDA test (reported, NPU011): on NPU the
    guarded code is skipped as before, until its CUDA values are settled."""
    testing = is_test_path(ctx.path)
    left = sorted(((line(f.node), _left_kind(ctx, f), f.node) for f in findings
                   if _left_kind(ctx, f) in _LEFT_CUDA or (testing and _asserts_cuda(ctx, f))),
                  key=lambda t: t[:2])
    if not left:
        return edits, []
    marks = _skip_marks(ctx) if testing else {}
    held: dict[int, tuple[cst.CSTNode, Edit]] = {}
    spans: list[tuple[int, int]] = []
    dropped: set[int] = set()
    for edit in edits:
        if edit.rule not in _TEST_REWRITES:
            continue
        mark = next((m for m in marks.values() if m[0] is edit.anchor or any(a is m[0] for a in ctx.ancestors(edit.anchor))),
                    None)
        if mark is not None:
            # `cuda_required = pytest.mark.skipif(not torch.cuda.is_available(), ...)` at the top of a
            # test module, then `@cuda_required` on tests (sd-scripts' test_lumina_models.py): held
            # by what any test it decorates keeps of CUDA
            statement, users = mark
            inside = [(first, last) for first, last in users
                      if any(first <= n <= last and rule in (_LEFT_CUDA | {KERNEL_GATE_RULE}) for n, rule, _ in left)]
            if inside:
                dropped.add(id(edit))
                spans.extend(inside)
                held.setdefault(id(statement), (statement, edit))
            continue
        gate = _gate_span(ctx, edit.anchor)
        if gate is None:
            continue
        test, (first, last), kinds = gate
        if testing:
            kinds = kinds | {KERNEL_GATE_RULE}
        choice = ctx.parent(test)
        if isinstance(choice, cst.IfExp):
            # one expression, often one line: the left value must be inside the value it picks
            inside = next((n for n, rule, node in left if rule in kinds and (
                node is choice.body or any(a is choice.body for a in ctx.ancestors(node)))), None)
        else:
            inside = next((n for n, rule, _node in left
                           if rule in kinds and first <= n <= last and n != line(edit.anchor)), None)
        if inside is None:
            continue
        dropped.add(id(edit))
        spans.append((first, last))
        held.setdefault(id(test), (test, edit))
    # the guarded code stays CUDA's as a whole (no `npu` assertion beside a `"cuda"` device)
    dropped |= {id(e) for e in edits if e.rule in _TEST_REWRITES and any(a <= line(e.anchor) <= b for a, b in spans)}
    found = [FindingRecord(
        KERNEL_GATE_RULE,
        edit.anchor,
        f"`{' '.join(ctx.module.code_for_node(test).split())[:100]}` guards code that keeps a CUDA value "
        "the tool could not migrate (reported there); left as a CUDA test, so on NPU that code is skipped as before",
        "migrate the reported CUDA values under this test, then rewrite the test for the NPU",
    ) for test, edit in held.values()]
    return [e for e in edits if id(e) not in dropped], found


def _asserts_cuda(ctx: FileContext, finding: FindingRecord) -> bool:
    """A CUDA test kept in an ``assert`` of a test (NPU011: ``assert all(t.device.type ==
    "cuda" for t in moved)``): on the NPU that assertion fails, so the test must stay
    skipped there."""
    return finding.rule == KERNEL_GATE_RULE and any(isinstance(a, cst.Assert) for a in ctx.ancestors(finding.node))


def _skip_marks(ctx: FileContext) -> dict[str, tuple[cst.CSTNode, list[tuple[int, int]]]]:
    """Module-level skip marks of a test module (``cuda_required = pytest.mark.skipif(...)``,
    ``requires_gpu = unittest.skipIf(...)``): name -> (the statement, the line spans of the
    tests and classes it decorates, decorators included)."""
    marks: dict[str, cst.CSTNode] = {}
    for statement in ctx.module.body:
        small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
        if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                and isinstance(small.value, cst.Call) and _SKIP_CALL.search(ctx.module.code_for_node(small.value.func))):
            marks[small.targets[0].target.value] = statement
    if not marks:
        return {}
    found: dict[str, tuple[cst.CSTNode, list[tuple[int, int]]]] = {}

    class _Users(cst.CSTVisitor):
        def _decorated(self, node: cst.FunctionDef | cst.ClassDef) -> None:
            for decorator in node.decorators:
                name = decorator.decorator
                if isinstance(name, cst.Name) and name.value in marks:
                    found.setdefault(name.value, (marks[name.value], []))[1].append(_with_decorators(ctx, node))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self._decorated(node)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            self._decorated(node)

    ctx.module.visit(_Users())
    return found


#: The callee of a skip mark: ``pytest.mark.skipif``, ``unittest.skipIf``, ``skip_if``.
_SKIP_CALL = re.compile(r"skip_?if", re.IGNORECASE)


def _in_owner(ctx: FileContext, node: cst.CSTNode, owners: set[int]) -> bool:
    return id(node) in owners or any(id(a) in owners for a in ctx.ancestors(node))


def _backend_regions(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], dict]:
    """Edits inside another backend's implementation (a ``cuda()`` override, a CUDA/ROCm
    platform class or module, ROCm detection, a missing-NPU fallback...) are dropped and
    the region reported once; so are edits of an ``and``/``or`` chain that the rules
    rewrite only in part (``npu_migrate/python/cuda_backend.py``)."""
    kept, found, whole, reported = [], [], [], set()
    for edit in edits:
        if edit.rule in _IMPORT_EDITS:
            kept.append(edit)
            continue
        held = cuda_backend.region(ctx, edit.anchor, edit.rule)
        if held is None:
            kept.append(edit)
            continue
        owner, rule, message, entire = held
        if id(owner) in reported:
            continue
        reported.add(id(owner))
        if entire:
            whole.append(owner)
        where = edit.anchor if isinstance(owner, cst.Module) else owner
        if isinstance(where, (cst.FunctionDef, cst.ClassDef)):
            where = where.name if entire else edit.anchor
        advice = ("nothing to migrate here: its CUDA calls are the fallback of code written for Ascend"
                  if "written for Ascend" in message else
                  "nothing to migrate here: this code exists for CUDA (or ROCm); check that the NPU has its own path")
        found.append(FindingRecord(rule, where, message, advice))
    return kept, {"found": found, "whole": whole}


def _assignments(function: cst.FunctionDef) -> list[cst.Assign]:
    """The ``=`` assignments in ``function`` (not libcst.matchers: its import costs the
    engine's start-up, which pre-commit pays on every run)."""
    found: list[cst.Assign] = []

    class _Collect(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            found.append(node)

    function.visit(_Collect())
    return found


def _calls_keeping_cuda(ctx: FileContext, edits: list[Edit], findings: list[FindingRecord], line) -> list[Edit]:
    """A call that keeps a ``"cuda"`` argument the tool could not prove a torch device
    (NPU108: ``apply_model(model, wav.cuda(), device="cuda")``, demucs's function) keeps
    its other device code too: the statement's edits, and those of the statements of the
    same function that assign the names it passes (``model = get_model().to("cuda")``).
    Rewritten, they handed NPU tensors and an NPU model to a call told to use CUDA
    (audiocraft's jasco demo, held-out round 17). NPU108 already reports the call."""
    held: list[tuple[int, int]] = []
    for finding in findings:
        if finding.rule != "NPU108":
            continue
        call = statement = function = None
        for ancestor in ctx.ancestors(finding.node):
            if isinstance(ancestor, cst.Call) and call is None:
                call = ancestor
            if isinstance(ancestor, cst.SimpleStatementLine) and statement is None:
                statement = ancestor
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
                break
        if call is None or statement is None:
            continue
        where = ctx.position(statement)
        held.append((where.start.line, where.end.line))
        names = {a.value.value for a in call.args if isinstance(a.value, cst.Name)}
        if function is None or not names:
            continue
        for assign in _assignments(function):
            if any(isinstance(t.target, cst.Name) and t.target.value in names for t in assign.targets):
                where = ctx.position(assign)
                held.append((where.start.line, where.end.line))
    if not held:
        return edits
    return [e for e in edits if e.rule not in _DEVICE_RULES or not any(a <= line(e.anchor) <= b for a, b in held)]


def _partial_chains(ctx: FileContext, kept: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """An ``and``/``or`` chain is rewritten all or nothing (``cuda_backend.partial_chains``)."""
    found = []
    dropped = cuda_backend.partial_chains(ctx, kept, line)
    if dropped:
        chains = {}
        for edit in kept:
            if id(edit) in dropped:
                chains.setdefault(ctx.enclosing_statement(edit.anchor), edit)
        for edit in chains.values():
            found.append(FindingRecord(
                NPU_AWARE_RULE, edit.anchor,
                "an `and`/`or` chain with a CUDA term that has no NPU counterpart; rewritten all or nothing, "
                "so left unchanged",
                "check this test on Ascend: rewrite the whole chain by hand if the NPU should pass it"))
    return [e for e in kept if id(e) not in dropped], found


def _aware_options(ctx: FileContext, edits: list[Edit], findings: list[FindingRecord],
                   line) -> tuple[list[Edit], list[FindingRecord]]:
    """Statements that set or test, with a CUDA value, an option whose choices already offer
    the NPU (:mod:`npu_migrate.python.aware_options`) keep their edits out and are reported
    once each (NPU010)."""
    if not edits or "choices" not in ctx.text:
        return edits, findings
    spans = aware_options.aware_option_spans(ctx.python_ast())
    if not spans:
        return edits, findings

    def span_of(node: cst.CSTNode):
        number = line(node)
        return next((s for s in spans if s[0] <= number <= s[1]), None)

    held: dict[tuple[int, int, str], Edit] = {}
    kept = []
    for edit in edits:
        span = span_of(edit.anchor)
        if span is None or edit.rule in _IMPORT_EDITS:
            kept.append(edit)
        else:
            held.setdefault(span, edit)
    if not held:
        return edits, findings
    findings = [f for f in findings if span_of(f.node) is None or f.rule == NPU_AWARE_RULE]
    for (first, _, option), edit in sorted(held.items()):
        findings.append(FindingRecord(
            NPU_AWARE_RULE, edit.anchor,
            f"the `{option}` option already offers the NPU (its choices name both the NPU and CUDA): this statement "
            "is its CUDA path; left unchanged",
            "nothing to migrate here: choose the NPU with that option on Ascend"))
    return kept, findings


def _aware_flags(ctx: FileContext, kept: set[int]) -> dict:
    """Assignments to flags tested in NPU-aware chains (``npu_aware.flags_feeding_aware_chains``);
    ``kept``: the lines that still hold an edit."""
    tree = ctx.python_ast()
    if tree is None or not kept:
        return {}
    return npu_aware.flags_feeding_aware_chains(tree, kept)


#: the text an f-string starts with when it builds a CUDA device (``f"cuda:{...}"``)
_CUDA_FSTRING_HEAD = re.compile(r"cuda:")


def _device_fstrings(ctx: FileContext, edits: list[Edit]) -> list[Edit]:
    """``f"cuda:{torch.cuda.current_device()}"`` is one device: its index call is rewritten
    only with its ``cuda:`` head. Where the head stays (its use could not be proven to
    reach torch, and NPU108 reports the string: diffusers' bitsandbytes ``device_map``),
    the call stays too, so the string never names an NPU index under the CUDA prefix."""
    calls = [e for e in edits if e.rule == "NPU101"]
    if not calls:
        return edits
    heads = {id(e.node) for e in edits if e.rule == "NPU104"}
    dropped: set[int] = set()
    for edit in calls:
        fstring = next((a for a in ctx.ancestors(edit.node) if isinstance(a, cst.FormattedString)), None)
        if fstring is None or not fstring.parts or not isinstance(fstring.parts[0], cst.FormattedStringText) \
                or not _CUDA_FSTRING_HEAD.match(fstring.parts[0].value):
            continue
        if id(fstring) not in heads and not any(id(part) in heads for part in fstring.parts):
            dropped.add(id(edit))
    return [e for e in edits if id(e) not in dropped]


def _with_requirements(edits: list[Edit]) -> list[Edit]:
    """Drop the edits whose ``requires`` lost an edit to the filters above: an import
    that NPU101 renames or removes because other rules rewrite every use of it must stay
    as it was when one of those uses stays (``# npu-migrate: ignore[NPU301]`` on it)."""
    if not any(e.requires for e in edits):
        return edits
    replaced = {e.node for e in edits if e.replacement is not None}
    return [e for e in edits if all(node in replaced for node in e.requires)]


def _moves_to_device(edit: Edit) -> bool:
    """Device work a skipped branch would lose: ``.cuda()``, device values, ``set_device``."""
    if edit.rule in ("NPU104", "NPU105"):
        return True
    if edit.rule == "NPU103":
        return isinstance(edit.node, cst.Attribute) and edit.node.attr.value == "cuda"
    if edit.rule == "NPU101":
        return isinstance(edit.node, cst.Attribute) and edit.node.attr.value == "set_device"
    return False


#: Rules whose edits put work on the NPU: device strings and objects, ``.cuda()``,
#: ``torch.cuda`` calls, ``CUDA_VISIBLE_DEVICES``
_DEVICE_RULES = ("NPU101", "NPU103", "NPU104", "NPU105", "NPU106")


def _cuda_only_scopes(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """Code whose device work exists for CUDA-only code keeps it as CUDA's; its device edits
    are dropped and reported once, at the first of them (NPU011):

    * a function that hands tensors to another library's NCCL communicator (vLLM's weight
      transfer, a ``PyNcclCommunicator``): moving them to the NPU would feed NPU memory
      to a CUDA communicator;
    * a ``__main__`` block that imports a package of CUDA kernels or Triton code to test
      or time it (lingua's ``causal_conv1d_compilable.py`` checks its op against
      ``causal_conv1d``): on NPU its tensors would go into those kernels, and it is no
      training entry point, so it gets no npu_runtime either;
    * a test function (in a test module) that calls such code on every run (open_lm's
      ``test_attention_masking_xformers``): it fails without CUDA whatever its device code
      says (``cuda_only.unconditional_kernel_call``)."""
    candidates = [e for e in edits if e.rule in _DEVICE_RULES or e.rule == _RUNTIME_RULE]
    index = cuda_only.file_index(ctx) if candidates else None
    if index is None:
        return edits, []
    testing = is_test_path(ctx.path)
    dropped: set[int] = set()
    reported: dict[int, tuple[Edit, str, str]] = {}
    verdicts: dict[int, tuple[str, str] | None] = {}  # per scope: the finding's message and advice
    for edit in sorted(candidates, key=lambda e: line(e.anchor)):
        number = line(edit.anchor)
        # the function around the edit and those around it (a generator defined inside the
        # function that hands its tensors to the communicator), else the `__main__` block
        scopes = cuda_only.enclosing_functions(index.tree, number) or [cuda_only.main_block(index.tree, number)]
        verdict = scope = None
        for scope in (s for s in scopes if s is not None):
            if id(scope) not in verdicts:
                verdicts[id(scope)] = _cuda_only_scope(index, scope, testing)
            verdict = verdicts[id(scope)]
            if verdict is not None:
                break
        if verdict is None or (edit.rule == _RUNTIME_RULE and isinstance(scope, ast.FunctionDef)):
            continue
        dropped.add(id(edit))
        if edit.rule in _DEVICE_RULES:
            reported.setdefault(id(scope), (edit, *verdict))
    findings = [FindingRecord(KERNEL_GATE_RULE, edit.anchor, message, advice)
                for edit, message, advice in reported.values()]
    return [e for e in edits if id(e) not in dropped], findings


#: words without which a file runs no TensorRT context and imports no TensorRT package
#: (`execute_async_v3`, `create_execution_context`; `tensorrt`, `torch_tensorrt`, `torch2trt`)
_TENSORRT_WORDS = ("execut", "tensorrt", "2trt")


def _tensorrt_blocks(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """Device edits in a function or branch that runs a TensorRT execution context
    (:func:`cuda_only.tensorrt_blocks`) are dropped and reported once per block (NPU011):
    that code hands CUDA streams and device pointers to TensorRT, which has no Ascend build."""
    candidates = [e for e in edits if e.rule in _DEVICE_RULES or e.rule == "NPU402"]
    if not candidates or not any(word in ctx.text for word in _TENSORRT_WORDS):
        return edits, []
    tree = ctx.python_ast()
    blocks = cuda_only.tensorrt_blocks(tree) if tree is not None else []
    if not blocks:
        return edits, []
    dropped: set[int] = set()
    reported: dict[tuple[int, int], FindingRecord] = {}
    for edit in sorted(candidates, key=lambda e: line(e.anchor)):
        number = line(edit.anchor)
        block = next(((a, b, at, name) for a, b, at, name in blocks if a <= number <= b), None)
        if block is None:
            continue
        first, last, at, name = block
        dropped.add(id(edit))
        reported.setdefault((first, last), FindingRecord(
            KERNEL_GATE_RULE, edit.anchor,
            (f"this code uses TensorRT (`{name}`, imported at line {at}): its engines and tensors are TensorRT's, "
             "which has no Ascend build; left unchanged" if name in cuda_only.TENSORRT_PACKAGES else
             f"this code runs a TensorRT execution context (`{name}`, line {at}): its streams and tensors are "
             "TensorRT's, which has no Ascend build; left unchanged"),
            "port the engine to Ascend (an OM model run by ACL/MindIE, or the PyTorch module itself) and migrate "
            "this block with it"))
    return [e for e in edits if id(e) not in dropped], list(reported.values())


#: the rule that reports a "cuda" string whose use as a device it could not prove
_UNPROVEN_DEVICE_RULE = "NPU108"


def _statements_left_half(ctx: FileContext, edits: list[Edit], findings: list[FindingRecord], table,
                          line) -> tuple[list[Edit], list[FindingRecord]]:
    """A statement that holds a "cuda" the tool leaves unproven (NPU108) keeps its other
    device edits too: ``devices = ["cuda:" + str(i) for i in range(torch.cuda.device_count())]``
    half-migrated counted NPUs and named them ``cuda:N`` (llama-moe, held-out round 20).
    The statement stays as written, and NPU108's finding points at it; the other statements of a
    held branch get findings of their own, returned with the edits kept."""
    left = [f for f in findings if (f.rule == _UNPROVEN_DEVICE_RULE and not _is_dict_key(ctx, f.node))
            or _left_cuda_call(f)]
    unproven = {id(statement) for f in left if (statement := ctx.enclosing_statement(f.node)) is not None}
    if not unproven:
        return edits, []
    # and the `if` whose branch holds such a value, its test with that branch: `if
    # torch.cuda.is_available(): devices.append("cuda")` rewritten alone counted NPUs and
    # listed "cuda" (nerfstudio's get_available_devices, held-out round 25); the test alone
    # kept, the branch's `torch.cuda.set_device` became the NPU's under a CUDA test (RLinf,
    # found reading the change side by side)
    held: set[int] = set()
    for f in left:
        branch = next((a for a in ctx.ancestors(f.node) if isinstance(a, cst.If)), None)
        if branch is None or any(a is branch.test for a in ctx.ancestors(f.node)):
            continue
        suite = next((s for s in (branch.body, branch.orelse) if s is not None
                      and any(a is s for a in ctx.ancestors(f.node))), None)
        held.update({id(branch.test), id(suite)} if suite is not None else {id(branch.test)})

    def in_branch(node: cst.CSTNode) -> bool:
        return id(node) in held or any(id(a) in held for a in ctx.ancestors(node))

    kept, reported, found = [], set(unproven), []
    for e in edits:
        statement = ctx.enclosing_statement(e.anchor)
        if e.rule not in _DEVICE_RULES or (id(statement) not in unproven and not in_branch(e.anchor)):
            kept.append(e)
        elif (statement is not None and id(statement) not in reported
              and not any(statement is a for f in left for a in ctx.ancestors(f.node))
              and not is_suppressed(table, line(e.anchor), e.rule)):
            # a statement of the held branch whose own CUDA is left with it is said so on its
            # line, never left silent (accelerate's rng_sync_check: the assert over
            # torch.cuda.get_rng_state() under the branch's `synchronize_rng_states(["cuda"])`)
            reported.add(id(statement))
            found.append(FindingRecord(
                e.rule, e.anchor, "CUDA code left as written: its branch also holds a \"cuda\" value the tool "
                "could not prove is a torch device, and the branch is migrated whole or not at all",
                "settle that value first (see the finding beside it), then migrate the branch by hand or rerun"))
    return kept, found


def _left_cuda_call(finding: FindingRecord) -> bool:
    """NPU103 leaves a ``.cuda(...)`` call (a container's, or one with a device argument in a
    project whose containers have no ``.npu()``): its arguments stay CUDA's with it (verl's
    ``model_module.cuda(torch.cuda.current_device())`` had become ``.cuda(torch.npu...)``)."""
    node = finding.node
    return (finding.rule == "NPU103" and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "cuda")


def _is_dict_key(ctx: FileContext, node: cst.CSTNode) -> bool:
    """A key of a mapping: a ``map_location`` table's (``{"cuda:1": "cuda:0"}``) names where a
    checkpoint was saved, and a state entry's (``rng_state["cuda"] = torch.cuda.get_rng_state()``,
    composer's and ms-swift's checkpoints) is a name in a file; both stay CUDA's by design
    beside the rewritten value."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.DictElement) and parent.key is node:
        return True
    return isinstance(parent, cst.Index) and isinstance(ctx.parent(parent), cst.SubscriptElement)


def _functions_that_cannot_run(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """Edits in functions that cannot run on Ascend (``npu_migrate/python/cannot_run.py``:
    verl's ``init_model`` imports an actor module that imports flash-attn, and the methods
    that use what it builds) are dropped and reported once per function (NPU011): they serve
    nothing there until that import is ported, and rewritten they moved data to the NPU for
    code that stays CUDA's. The import of torch_npu and npu_runtime's set-up are not theirs."""
    candidates = [e for e in edits if e.rule not in _IMPORT_EDITS]
    index = cuda_only.file_index(ctx) if candidates and "import" in ctx.text else None
    failing = cannot_run.failing_functions(index) if index is not None else {}
    if not failing:
        return edits, []
    dropped: set[int] = set()
    reported: dict[int, tuple[Edit, str]] = {}
    for edit in sorted(candidates, key=lambda e: line(e.anchor)):
        function = next((f for f in cuda_only.enclosing_functions(index.tree, line(edit.anchor)) if id(f) in failing),
                        None)
        if function is None:
            continue
        dropped.add(id(edit))
        reported.setdefault(id(function), (edit, f"`{function.name}` cannot run on Ascend: {failing[id(function)][1]}; "
                                                 "its device code is left as it is"))
    findings = [FindingRecord(KERNEL_GATE_RULE, edit.anchor, message, _PORT_IMPORT_FIRST)
                for edit, message in reported.values()]
    return [e for e in edits if id(e) not in dropped], findings


def _kernel_wrappers(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """Device edits in a function that hands its tensors to the project's own CUDA kernel on
    every run (``cuda_only.always_calls_own_kernel``: RWKV's autograd ``WKV`` allocating the
    buffers ``wkv_cuda`` writes, and ``RUN_CUDA`` moving its inputs for it) are dropped and
    reported once per function (NPU011): on NPU they would feed NPU tensors to a CUDA kernel.
    Porting the kernel replaces such a function whole. Run before the gates, so that a test
    in front of the kernel's code (``if os.environ["RUN_DEVICE"] == "cuda":``) sees no
    device work left behind it and stays a CUDA test."""
    candidates = [e for e in edits if e.rule in _DEVICE_RULES]
    index = cuda_only.file_index(ctx) if candidates else None
    if index is None:
        return edits, []
    dropped: set[int] = set()
    reported: dict[int, tuple[Edit, str]] = {}
    verdicts: dict[int, cuda_only.CudaOnly | None] = {}
    for edit in sorted(candidates, key=lambda e: line(e.anchor)):
        functions = cuda_only.enclosing_functions(index.tree, line(edit.anchor))
        if not functions:
            continue
        function = functions[0]
        if id(function) not in verdicts:
            verdicts[id(function)] = cuda_only.always_calls_own_kernel(index, function)
        use = verdicts[id(function)]
        if use is None:
            continue
        dropped.add(id(edit))
        reported.setdefault(id(function), (edit, f"`{function.name}` hands its tensors to `{use.name}` ({use.kind}) on "
                                                 "every call; its device code is left as CUDA's"))
    findings = [FindingRecord(KERNEL_GATE_RULE, edit.anchor, message,
                              "port that kernel first (torch ops or an Ascend C custom operator), then run npu-migrate "
                              "again to migrate what it leaves")
                for edit, message in reported.values()]
    return [e for e in edits if id(e) not in dropped], findings


_PORT_IMPORT_FIRST = "port that import first, then run npu-migrate again to migrate the rest"
_RUNTIME_RULE = "NPU701"
#: kinds whose code is not a kernel: a device value handed to them still matters on NPU
_NOT_KERNELS = frozenset({cuda_only.KIND_DATA_PARALLEL, cuda_only.KIND_EXTENSION_BUILD, cuda_only.KIND_NAMED_PACKAGE,
                          cuda_only.KIND_CAPABILITY, cuda_only.KIND_CUDA_VERSION})


def _device_arguments_of_kernels(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """A device value handed straight to CUDA-only code as an argument (open_lm's
    ``megablocks.layers.arguments.Arguments(device=torch.cuda.current_device())``): that
    code runs on no NPU whatever device it is given, so the edit serves nothing; it is
    dropped and the call reported once (NPU011)."""
    candidates = [e for e in edits if e.rule in _DEVICE_RULES]
    index = cuda_only.file_index(ctx) if candidates else None
    if index is None:
        return edits, []
    dropped: set[int] = set()
    reported: dict[int, tuple[Edit, str, str]] = {}
    for edit in candidates:
        below: list[cst.CSTNode] = []  # the anchor's ancestors up to the argument that holds it
        argument = None
        for ancestor in ctx.ancestors(edit.anchor):
            if isinstance(ancestor, cst.Arg):
                argument = ancestor
                break
            below.append(ancestor)
        call = ctx.parent(argument) if argument is not None else None
        if not isinstance(call, cst.Call) or any(isinstance(a, cst.Call) and a is not argument.value for a in below):
            continue  # only a value that is the argument itself (`torch.cuda.current_device()`, `"cuda"`)
        callee = get_full_name_for_node(call.func)
        if not callee or callee.split(".", 1)[0] not in index.bindings:
            continue  # only code imported from CUDA-only packages, not the file's own mixed code
        kind = index.kind_of(callee)
        if kind is None or kind in _NOT_KERNELS or kind.startswith("it calls"):
            continue
        dropped.add(id(edit))
        reported.setdefault(id(call), (edit, index.resolve(callee), kind))
    findings = [FindingRecord(
        KERNEL_GATE_RULE, edit.anchor,
        f"a device value handed to `{callee}` ({kind}); left as CUDA's: that code does not run on NPU "
        "whatever device it is given",
        "nothing to migrate here: port or replace that code for Ascend, then its device argument") for
        edit, callee, kind in reported.values()]
    return [e for e in edits if id(e) not in dropped], findings


def _assigned_device_name(ctx: FileContext, anchor: cst.CSTNode) -> str | None:
    """``device`` where the edit's anchor is the value of ``device = "cuda"`` (or a branch of
    a conditional expression there); not a tensor built with it (``q = torch.randn(...,
    device="cuda")`` handed to flash-attn: the tensor is data, and the kernel's own finding,
    NPU901, says what to port)."""
    for ancestor in ctx.ancestors(anchor):
        call = ctx.parent(ancestor) if isinstance(ancestor, cst.Arg) else ancestor
        if isinstance(call, cst.Call):
            if (get_full_name_for_node(call.func) or "").rsplit(".", 1)[-1] != "device":
                return None  # `device = torch.device("cuda")` is still the device
        elif isinstance(ancestor, cst.Subscript):
            return None
        if isinstance(ancestor, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in ancestor.targets] if isinstance(ancestor, cst.Assign) else [ancestor.target]
            names = [t.value for t in targets if isinstance(t, cst.Name)]
            return names[0] if len(names) == 1 == len(targets) else None
        if isinstance(ancestor, (cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Lambda)):
            return None
    return None


def _kernel_sink(index, function: ast.AST, name: str) -> tuple[str, str, ast.AST | None] | None:
    """The first call in ``function`` that takes ``name`` (in its arguments, however deep:
    ``prepare(w.to(device=device))``) into CUDA-only code: a kernel itself, or a function
    of this file that calls one on every run (gpt-fast's ``prepare_int4_weight_and_scales_and_zeros``,
    which packs with ``aten._convert_weight_to_int4pack``). Returns (callee, kind, the
    callee's definition when it is a function of this file)."""
    definitions = {n.name: n for n in index.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        callee = cuda_only.ast_dotted_name(node.func)
        kind = index.kind_of(callee) if callee else None
        if kind is None or kind in _NOT_KERNELS:
            continue
        definition = definitions.get(callee)
        if kind.startswith("it calls"):
            use = cuda_only.unconditional_kernel_call(index, definition) if definition is not None else None
            if use is None:
                continue  # a method, or mixed code of the file's own: its CUDA path may be one of several
            kind = f"it calls {use.name}, {use.kind}"
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(n, ast.Name) and n.id == name for a in arguments for n in ast.walk(a)):
            return callee, kind, definition
    return None


def _devices_into_kernels(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """A device a function picks (``device = "cuda"``) and hands, in its tensors, to CUDA-only
    code in the same function: gpt-fast's int4 handler moves each weight to ``device`` and
    packs it with ``aten._convert_weight_to_int4pack`` through a helper of the file; on NPU
    those tensors would reach a kernel with no NPU build. The device stays CUDA's and the
    call is reported once (NPU011); so does the other device code of that function and of
    the file's function it hands the device to (lit-llama's GPTQ quantizer frees and
    measures the CUDA memory it quantizes on: rewritten, those calls asked the NPU)."""
    candidates = [e for e in edits if e.rule in _DEVICE_RULES]
    index = cuda_only.file_index(ctx) if candidates else None
    if index is None:
        return edits, []
    dropped: set[int] = set()
    reported: dict[tuple[int, str], tuple[Edit, str, str]] = {}
    sinks: dict[tuple[int, str], tuple[str, str, ast.AST | None] | None] = {}
    spans: list[tuple[int, int]] = []  # the functions whose device code stays CUDA's with it
    for edit in candidates:
        name = _assigned_device_name(ctx, edit.anchor)
        function = cuda_only.enclosing_function(index.tree, line(edit.anchor)) if name else None
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        key = (id(function), name)
        if key not in sinks:
            sinks[key] = _kernel_sink(index, function, name)
        if sinks[key] is None:
            continue
        dropped.add(id(edit))
        reported.setdefault(key, (edit, name, *sinks[key][:2]))
        spans.append((function.lineno, function.end_lineno or function.lineno))
        if sinks[key][2] is not None:
            spans.append((sinks[key][2].lineno, sinks[key][2].end_lineno or sinks[key][2].lineno))
    for edit in candidates:
        if any(a <= line(edit.anchor) <= b for a, b in spans):
            dropped.add(id(edit))
    findings = [FindingRecord(
        KERNEL_GATE_RULE, edit.anchor,
        f"`{name}` is handed, in its tensors, to `{callee}` ({kind}); left as CUDA's: on NPU those tensors "
        "would reach a kernel that has no NPU build",
        "port that call for Ascend first (torch_npu has its own kernels for some, such as "
        "torch_npu.npu_convert_weight_to_int4pack), then move this device to the NPU") for
        edit, name, callee, kind in reported.values()]
    return [e for e in edits if id(e) not in dropped], findings


def _functions_with_ascend_twins(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """A function of the file named for CUDA beside the project's own Ascend twin in the
    same file (Open-Sora-Plan's ``init_gpu_env`` beside ``init_npu_env``, each picked by
    whether torch_npu imports): the CUDA one is that path's, and rewriting it (``nccl`` to
    ``hccl``) breaks it without helping Ascend. Its edits are dropped and reported once (NPU010)."""
    tree = ctx.python_ast() if edits else None
    if tree is None:
        return edits, []
    names = {n.name for n in cuda_only.all_nodes(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    twinned = {name: twin for name in names for twin in file_roles.ascend_twins(name) if twin in names}
    if not twinned:
        return edits, []
    dropped: set[int] = set()
    reported: dict[str, Edit] = {}
    for edit in edits:
        for function in cuda_only.enclosing_functions(tree, line(edit.anchor)):
            if getattr(function, "name", None) in twinned:
                dropped.add(id(edit))
                reported.setdefault(function.name, edit)
                break
    findings = [FindingRecord(NPU_AWARE_RULE, edit.anchor,
                              f"`{name}` is CUDA's beside the project's own Ascend `{twinned[name]}`; left unchanged",
                              "nothing to migrate here") for name, edit in reported.items()]
    return [e for e in edits if id(e) not in dropped], findings


def _waiting(edits: list[Edit], rules, line) -> tuple[list[Edit], Edit | None]:
    """``edits`` without those of ``rules``, and the first of those (by line) where the
    finding that says why they wait goes; None when none of them is there."""
    kept = [e for e in edits if e.rule not in rules]
    left = [e for e in edits if e.rule in rules]
    return kept, (min(left, key=lambda e: line(e.anchor)) if left else None)


def _left_unread(ctx: FileContext, edits: list[Edit], findings: list[FindingRecord], table,
                 line) -> tuple[list[Edit], list[FindingRecord]]:
    """Drop the edits and findings in code whose value nothing reads
    (:mod:`npu_migrate.python.unread`); one NPU012 finding per function nothing calls that
    held one of them, at its name."""
    functions, values = unread.unread_spans(ctx)
    spans = values + [(first, last) for first, last, _ in functions]
    if not spans:
        return edits, findings

    def outside(node: cst.CSTNode) -> bool:
        number = line(node)
        return not any(first <= number <= last for first, last in spans)

    held = {line(e.anchor) for e in edits} | {line(f.node) for f in findings}
    defined = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    edits = [e for e in edits if outside(e.anchor)]
    findings = [f for f in findings if outside(f.node)]
    for first, last, name in functions:
        node = defined.get(name)
        if node is None or not any(first <= number <= last for number in held):
            continue
        if not is_suppressed(table, line(node), UNREAD_RULE):
            findings.append(FindingRecord(
                UNREAD_RULE, node.name,
                f"`{name}` is never called or named anywhere else in this project; its device code is left unchanged",
                "nothing to migrate while nothing calls it; if code outside this project calls it, migrate it by "
                "hand or deselect NPU012 to have npu-migrate migrate unreached code too"))
    return edits, findings


_LIGHTNING_RULE = "NPU960"
#: what waits for a Lightning accelerator: the device rules, the backend and AMP; and
#: ``map_location`` where the accelerator is CUDA's by name (``"cuda"``, ``"gpu"``): such a
#: script does not start on Ascend (lit-llama's finetune scripts, round 16), while one on
#: ``"auto"`` runs on the CPU there and loads CUDA-saved checkpoints through it
_LIGHTNING_WAITS = frozenset({*_DEVICE_RULES, "NPU201", "NPU301"})
_LIGHTNING_PINNED_WAITS = _LIGHTNING_WAITS | {"NPU402"}
#: NPU960's message for a Fabric/Trainer built with a literal CUDA accelerator (not a value
#: some other call passes: litgpt's API loads its checkpoints whatever `distribute()` picks)
_PINNED_ACCELERATOR = re.compile(r'`\w+\(accelerator="(?:cuda|gpu)"\)`')


def _left_to_lightning(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], FindingRecord | None]:
    """A file whose Lightning ``Fabric``/``Trainer`` has no NPU accelerator (NPU960 reports
    it: ``"auto"``, ``"gpu"``, ``"cuda"``) runs where Lightning puts it, which on Ascend is
    the CPU or nowhere: its device tests compare Lightning's device (``fabric.device.type ==
    "cuda"``) and its CUDA queries pick Lightning's precision. Rewritten before the
    accelerator is given, they named an NPU that Lightning never reports and moved a CPU
    run to bf16 (lit-llama's generate and finetune scripts, held-out round 16). The device
    edits wait for that port: dropped and reported once; a second run after it migrates them."""
    pinned = any(f.rule == _LIGHTNING_RULE and _PINNED_ACCELERATOR.match(f.message) for f in ctx.findings)
    kept, first = _waiting(edits, _LIGHTNING_PINNED_WAITS if pinned else _LIGHTNING_WAITS, line)
    if first is None:
        return edits, None
    return kept, FindingRecord(
        _LIGHTNING_RULE, first.anchor,
        "this file's device code runs where its Lightning Fabric/Trainer puts it, and Lightning has no NPU "
        "accelerator (reported above); its device code is left unchanged",
        "give the Fabric/Trainer an NPU accelerator first (see NPU960's advice), then run npu-migrate again to "
        "migrate this file's device code")


#: What torch_npu's ``transfer_to_npu`` maps at run time: ``torch.cuda.X`` (and its amp),
#: ``.cuda()``, ``"cuda"`` and integer devices in torch's calls, and the NCCL backend of
#: ``init_process_group`` (torch_npu/contrib/transfer_to_npu.py). Not ``map_location``,
#: the TF32 switches, CUDA_VISIBLE_DEVICES or the runtime.
_TRANSFER_TO_NPU_RULES = frozenset({"NPU101", "NPU103", "NPU104", "NPU105", "NPU201", "NPU301"})


def _left_to_transfer_to_npu(ctx: FileContext, edits: list[Edit], patcher: str,
                             line) -> tuple[list[Edit], FindingRecord | None]:
    """A file that imports, at some depth, the project's module that imports
    ``transfer_to_npu`` (Open-Sora-Plan's ``npu_config``) runs on Ascend with its CUDA
    calls mapped by torch_npu: the rewrites that mapping covers are dropped and reported
    once (NPU010); the others (TF32, ``map_location``, the runtime) stay."""
    kept, first = _waiting(edits, _TRANSFER_TO_NPU_RULES, line)
    if first is None:
        return edits, None
    where = "this file" if os.path.abspath(ctx.path) == patcher else f"`{os.path.basename(patcher)}`, which this file imports,"
    return kept, FindingRecord(
        NPU_AWARE_RULE, first.anchor,
        f"{where} imports torch_npu's transfer_to_npu: on Ascend its CUDA calls, devices and NCCL backend are mapped "
        "at run time; left unchanged",
        "nothing to do while the project keeps transfer_to_npu; to migrate this code in the source instead, drop "
        "that import and run npu-migrate again")


def _cuda_only_scope(index, scope: ast.AST, testing: bool) -> tuple[str, str] | None:
    """The finding (message, advice) for a scope whose device code stays CUDA's, or None."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        use = cuda_only.nccl_communicator(index, scope)
        if use is not None:
            return _scope_finding(use, f"`{scope.name}`")
        if testing and scope.name.startswith("test"):
            use = cuda_only.unconditional_kernel_call(index, scope)
            if use is not None:
                return _scope_finding(use, f"the test `{scope.name}`")
        use = cuda_only.unconditional_kernel_call(index, scope, nvml_only=True)
        if use is None:
            return None
        return (f"`{scope.name}` manages NVIDIA GPUs through NVML (`{use.name}`) on every run; its device code is "
                "left as CUDA's", "on Ascend, ask npu-smi or DCMI for what NVML answered here, or skip this "
                "function on NPU")
    use = cuda_only.kernel_import(index, scope)
    return _scope_finding(use, "the `__main__` block") if use is not None else None


def _scope_finding(use: cuda_only.CudaOnly, where: str) -> tuple[str, str]:
    if use.kind == cuda_only.KIND_NCCL_COMMUNICATOR:
        return (f"{where} hands tensors to `{use.name}` ({use.kind}); its device code is left as CUDA's",
                "port this path by hand to the library's HCCL communicator on Ascend (vLLM: vllm-ascend's "
                "PyHcclCommunicator and HCCL weight transfer)")
    return (f"{where} tests or times `{use.name}` ({use.kind}); its device code is left as CUDA's and it is "
            "not made an entry point",
            "nothing to do if the kernel has no Ascend build; to check an NPU port, point this block at it")


def _kernel_gates(ctx: FileContext, edits: list[Edit], line) -> tuple[list[Edit], list[FindingRecord]]:
    """Edits of CUDA tests that keep CUDA-only code from other devices are dropped and
    reported (NPU011); see ``npu_migrate/python/cuda_only.py``."""
    candidates = [e for e in edits if e.rule in _TEST_REWRITES]
    if not candidates:
        return edits, []
    edits, probe_findings = _capability_probes(ctx, edits)
    candidates = [e for e in edits if e.rule in _TEST_REWRITES]
    migrated = {(line(e.anchor), e.rule) for e in edits}
    testing = is_test_path(ctx.path)
    dropped: set[int] = set()
    findings = []
    all_kept: list[cuda_only.Gate] = []
    index = cuda_only.file_index(ctx)
    # Round two: state that only a kept gate's code sets (`self.gpu_config = ...` after
    # `if not torch.cuda.is_available(): return`) is CUDA-only too, so a test that picks
    # it (`self.gpu_config if q.is_cuda else self.cpu_config`) stays a CUDA test.
    for _ in range(2):
        gates: dict[cst.CSTNode, tuple[cuda_only.Gate, list[Edit]]] = {}
        for edit in candidates:
            if id(edit) in dropped:
                continue
            gate = cuda_only.kernel_gate(ctx, edit.anchor, migrated)
            if gate is not None:
                gates.setdefault(gate.test, (gate, []))[1].append(edit)
        kept = []
        for gate, group in gates.values():
            members = {id(e) for e in group}
            if not gate.has_fallback and not testing and any(
                _moves_to_device(e) and any(a <= line(e.anchor) <= b for a, b in gate.guarded)
                for e in edits if id(e) not in members
            ):
                # skipping the branch on NPU would lose its device work: rewrite the test (in a
                # test, skipping a block costs only its coverage, as on a CPU machine: open_lm's
                # `if torch.cuda.is_available():` block moves tensors to xformers_attn)
                continue
            dropped |= members
            kept.append(gate)
            all_kept.append(gate)
            test = ctx.module.code_for_node(gate.test)
            shown = " ".join(test.split()) if len(test) <= 80 else ctx.module.code_for_node(group[0].anchor)
            findings.append(FindingRecord(
                KERNEL_GATE_RULE,
                group[0].anchor,
                f"`{shown}` guards `{gate.kernel.name}` ({gate.kernel.kind}); left as a CUDA test, "
                f"so on NPU {gate.fallback}",
                "nothing to do if that path is right on NPU; to accelerate it, add an NPU branch before this test "
                "(a torch_npu fused op or an Ascend C kernel)",
            ))
        if not kept or index is None or not index.add_gated_state(kept, lambda g: ' '.join(ctx.module.code_for_node(g.test).split())):
            break
    condition_spans: list[tuple[int, int]] = []
    if dropped and index is not None:
        findings += _same_tests_as_gates(ctx, index.tree, candidates, dropped, line)
        findings += _same_conditions_as_gates(ctx, index.tree, candidates, dropped, line, condition_spans)
    # the code a kept gate guards runs only on CUDA: its torch.cuda calls and device values
    # stay CUDA's (kornia's inductor cache key: `(torch.cuda.get_device_name(device),
    # torch.cuda.get_device_capability(device)) if device.type == "cuda" else None` had its
    # first call rewritten beside the kept probe)
    # (and so do its other settings: sam2's `torch.backends.cuda.matmul.allow_tf32 = True`
    # under a kept compute-capability probe became torch_npu's HF32 switch, on code the NPU
    # never reaches)
    spans = [(a, b) for gate in all_kept for a, b in gate.guarded] + condition_spans
    if all_kept and index is not None:
        spans += cuda_only.regions_behind_flags(ctx, index, all_kept)
        spans += cuda_only.functions_only_within(index.tree, spans)
    for edit in edits:
        if edit.rule not in _IMPORT_EDITS and id(edit) not in dropped and any(a <= line(edit.anchor) <= b
                                                                             for a, b in spans):
            dropped.add(id(edit))
    return [e for e in edits if id(e) not in dropped], probe_findings + findings


def _test_atom(ctx: FileContext, node: cst.CSTNode) -> str:
    """The CUDA test ``node`` is part of, as text: the comparison (``device.type ==
    "cuda"``), or the attribute/call chain (``x.is_cuda``, ``torch.cuda.is_available()``)."""
    current = node
    while True:
        parent = ctx.parent(current)
        if (isinstance(parent, cst.Attribute) and parent.value is current) or (
                isinstance(parent, cst.Call) and parent.func is current):
            current = parent
            continue
        if isinstance(parent, cst.ComparisonTarget):
            current = ctx.parent(parent)
        elif isinstance(parent, cst.Comparison):
            current = parent
        break
    return " ".join(ctx.module.code_for_node(current).split())


def _same_tests_as_gates(ctx: FileContext, tree: ast.Module, candidates: list[Edit], dropped: set[int],
                         line) -> list[FindingRecord]:
    """A function that keeps a CUDA test as a gate (kornia's ONNX matcher: `elif device.type ==
    "cuda": providers = ["CUDAExecutionProvider", ...]`) keeps the same test elsewhere too
    (`weights = "disk_fp16" if device.type == "cuda" else "disk"`): rewriting those alone
    would have the function take the NPU for CUDA in one place and not in the other. The
    edits are dropped (added to ``dropped``) and reported."""
    kept: dict[tuple[int, str], int] = {}
    # tests of one value's device (`device.type == "cuda"`, `x.is_cuda`), not torch.cuda
    # queries, which a function asks for more than one reason
    candidates = [e for e in candidates if e.rule in _VALUE_TESTS]

    def function_of(edit: Edit) -> ast.AST | None:
        # within one function only: a script's module-level code tests its device for many
        # unrelated reasons (nanochat's base_train.py: FP8, synchronize, memory statistics)
        found = cuda_only.enclosing_function(tree, line(edit.anchor))
        return None if found is tree else found

    for edit in candidates:
        if id(edit) in dropped and (function := function_of(edit)) is not None:
            kept.setdefault((id(function), _test_atom(ctx, edit.anchor)), line(edit.anchor))
    findings = []
    for edit in candidates:
        if id(edit) in dropped or (function := function_of(edit)) is None:
            continue
        atom = _test_atom(ctx, edit.anchor)
        if (id(function), atom) not in kept:
            continue
        dropped.add(id(edit))
        findings.append(FindingRecord(
            KERNEL_GATE_RULE,
            edit.anchor,
            f"`{atom}` is the test kept as a CUDA test elsewhere in this function (reported there); left alike, "
            "so the function decides the device one way",
            "nothing to do if the CUDA path is right to skip on NPU; to run it there, give the function an NPU "
            "branch as a whole",
        ))
    return findings


def _whole_condition(ctx: FileContext, node: cst.CSTNode) -> tuple[str, tuple[int, int]] | None:
    """The whole test of the ``if``/``elif``/conditional expression/``while`` that holds
    ``node``, as text, with the lines of the code it opens; or None."""
    current = node
    while (parent := ctx.parent(current)) is not None:
        if isinstance(parent, (cst.If, cst.IfExp, cst.While)) and parent.test is current:
            body = ctx.position(parent.body)
            return " ".join(ctx.module.code_for_node(current).split()), (body.start.line, body.end.line)
        if isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return None
        current = parent
    return None


def _enclosing_class(tree: ast.Module, number: int) -> ast.ClassDef | None:
    found = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.ClassDef) and node.lineno <= number <= (node.end_lineno or node.lineno)
                and (found is None or node.lineno > found.lineno)):
            found = node
    return found


_BARE_CUDA_QUERY = re.compile(r"(?:not\s+)?\(?torch\.cuda\.[\w.]+\(\)\)?")


def _same_conditions_as_gates(ctx: FileContext, tree: ast.Module, candidates: list[Edit], dropped: set[int],
                              line, spans: list[tuple[int, int]]) -> list[FindingRecord]:
    """A class that keeps a whole condition as a CUDA gate (finetrainers' Timer: `if
    self.data.device == TimerDevice.CUDA and torch.cuda.is_available():` in front of
    `_start_cuda` and `_end_cuda`) keeps the same condition in its other methods too
    (`elapsed_time`): rewritten there alone, the timer read CUDA events it never recorded.
    The same whole condition (its text), within one class, or one function outside
    classes, decides one path; not a bare ``torch.cuda`` query (``torch.cuda.is_available()``
    alone), which a scope asks for many reasons. The edits are dropped (added to ``dropped``) and reported, and the code
    each such condition opens is added to ``spans`` (held like a kept gate's)."""
    def owner(edit: Edit) -> ast.AST | None:
        number = line(edit.anchor)
        found = _enclosing_class(tree, number)
        if found is None:
            function = cuda_only.enclosing_function(tree, number)
            found = None if function is tree else function
        return found

    kept: dict[tuple[int, str], int] = {}
    for edit in candidates:
        if id(edit) in dropped and (scope := owner(edit)) is not None:
            condition = _whole_condition(ctx, edit.anchor)
            # (a bare `torch.cuda.is_available()` is asked for many reasons in one scope:
            # fish-speech keeps the one that picks inductor, not the others)
            if condition is not None and not _BARE_CUDA_QUERY.fullmatch(condition[0]):
                kept.setdefault((id(scope), condition[0]), line(edit.anchor))
    if not kept:
        return []
    findings = []
    reported: set[tuple[int, str, int]] = set()
    for edit in candidates:
        if id(edit) in dropped or (scope := owner(edit)) is None:
            continue
        found = _whole_condition(ctx, edit.anchor)
        if found is None or (id(scope), found[0]) not in kept:
            continue
        condition, opened = found
        dropped.add(id(edit))
        spans.append(opened)
        if (id(scope), condition, opened[0]) in reported:
            continue  # one finding per condition
        reported.add((id(scope), condition, opened[0]))
        shown = condition if len(condition) <= 80 else condition[:77] + "..."
        findings.append(FindingRecord(
            KERNEL_GATE_RULE, edit.anchor,
            f"`{shown}` is kept as a CUDA test elsewhere in the same "
            f"{'class' if isinstance(scope, ast.ClassDef) else 'function'}; left alike, so it decides the device one way",
            f"see line {kept[(id(scope), condition)]} (written before this run); nothing to do if the CUDA path is "
            "right to skip on NPU; to run it there, give it an NPU branch as a whole",
        ))
    return findings


def _classes_alike(ctx: FileContext, value_tests: list[Edit], edits: list[Edit],
                   line) -> tuple[list[Edit], list[FindingRecord]]:
    """A class that keeps one of its device tests as CUDA's (a kernel gate, NPU011, or a
    dispatch to CUDA's own implementation, NPU010) keeps all of them: torchrl's
    PrioritizedSampler builds its CUDA segment tree behind ``device.type == "cuda"`` in
    ``_init`` (kept), so rewriting the same test in ``_tree_device_from_storage`` would put
    the tree on the NPU and build the CPU tree there. The class then takes the NPU for CUDA
    in some methods and not in others. ``value_tests`` are the tests of one value's device
    (``x.is_cuda``, ``device.type == "cuda"``) before the regions and gates dropped some;
    ``torch.cuda`` queries are asked for many reasons and are not held alike."""
    remaining = {id(e) for e in edits}

    def class_of(edit: Edit) -> cst.ClassDef | None:
        if not _is_device_test(ctx, edit.anchor):
            return None
        return next((a for a in ctx.ancestors(edit.anchor) if isinstance(a, cst.ClassDef)), None)

    kept: dict[int, str] = {}  # class -> where it keeps a test (a method's name: stable across runs)
    for edit in value_tests:
        if id(edit) not in remaining and (owner := class_of(edit)) is not None:
            method = next((a for a in ctx.ancestors(edit.anchor) if isinstance(a, cst.FunctionDef)), None)
            kept.setdefault(id(owner), f"`{method.name.value}`" if method is not None else "its body")
    if not kept:
        return edits, []
    dropped, findings = set(), []
    for edit in edits:
        if edit.rule not in _VALUE_TESTS or (owner := class_of(edit)) is None or id(owner) not in kept:
            continue
        dropped.add(id(edit))
        findings.append(FindingRecord(
            KERNEL_GATE_RULE,
            edit.anchor,
            f"`{_test_atom(ctx, edit.anchor)}`: class `{owner.name.value}` keeps a device test in "
            f"{kept[id(owner)]} as CUDA's own path; left alike, so the class decides the device one way",
            "nothing to do if the CUDA path is right to skip on NPU; to run it there, give the class an NPU "
            "path as a whole",
        ))
    return [e for e in edits if id(e) not in dropped], findings


def _is_device_test(ctx: FileContext, node: cst.CSTNode) -> bool:
    """``node`` is (part of) a test of one value's device: ``x.is_cuda``, or a string
    compared with ``device.type`` (``== "cuda"``, ``in ("cpu", "cuda")``); not a device
    string handed to ``torch.device(...)`` or ``.to(...)``."""
    if isinstance(node, cst.Attribute) and node.attr.value == "is_cuda" or (
            isinstance(node, cst.Name) and node.value == "is_cuda"):
        return True
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.Comparison, cst.ComparisonTarget)):
            return True
        if isinstance(ancestor, (cst.Call, cst.Arg, cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _char_column(lines: list[str], line: int, byte_col: int) -> int:
    """``ast`` counts columns in UTF-8 bytes, libcst in characters; and a form feed
    that starts a line counts as a column for ``ast``, not for libcst."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    column = len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))
    feeds = len(text) - len(text.lstrip("\f"))
    return column - feeds if column >= feeds else column


def _capability_probes(ctx: FileContext, edits: list[Edit]) -> tuple[list[Edit], list[FindingRecord]]:
    """A CUDA compute-capability probe (``torch.cuda.get_device_properties(d).major``,
    ``torch.cuda.get_device_capability()``) stays a CUDA call: the NPU counterparts
    have no major/minor (or return None), so the rewrite would crash where the original
    code, behind its CUDA test, took the generic path. The gate in front of it is kept
    by :func:`_kernel_gates` (``cuda_only.KIND_CAPABILITY``)."""
    index = cuda_only.file_index(ctx)
    if index is None or not index.probes:
        return edits, []
    lines = ctx.text.split("\n")  # not splitlines(): a form feed does not end a line for ast
    spans = []
    for call in index.probes:
        start = (call.lineno, _char_column(lines, call.lineno, call.col_offset))
        end_line = call.end_lineno or call.lineno
        end = (end_line, _char_column(lines, end_line, call.end_col_offset or 0))
        spans.append((start, end, call))
    kept, findings, reported = [], [], set()
    for edit in edits:
        where = ctx.position(edit.anchor).start
        at = (where.line, where.column)
        span = next((s for s in spans if s[0] <= at < s[1]), None)
        if span is None or edit.rule not in _TEST_REWRITES:
            kept.append(edit)
            continue
        if id(span[2]) in reported:
            continue
        reported.add(id(span[2]))
        name = cuda_only.ast_dotted_name(span[2].func) or "torch.cuda"
        findings.append(FindingRecord(
            KERNEL_GATE_RULE,
            edit.anchor,
            f"`{name}(...)` probes the CUDA compute capability; left as a CUDA call "
            "(on NPU, get_device_capability() returns None and the device properties have no major/minor)",
            "keep it behind a CUDA test (the test in front of it stays a CUDA test); on NPU choose the path "
            "by the device type or a feature test such as torch.npu.is_bf16_supported()",
        ))
    return kept, findings


def _annotations(ctx: FileContext, findings: list[FindingRecord]) -> list[Edit]:
    """``--annotate``: one TODO comment per finding above its statement (idempotent)."""
    by_statement: dict[cst.CSTNode, list[str]] = {}
    # Comments above a file's first statement are parsed into Module.header, not
    # into the statement's leading_lines: count them too, or a re-run adds them again.
    header = {line.comment.value for line in ctx.module.header if line.comment is not None}
    for finding in findings:
        statement = ctx.enclosing_statement(finding.node)
        if statement is None or finding.rule == NPU_AWARE_RULE:  # NPU010: nothing to do there
            continue
        message = " ".join(finding.message.split())
        suggestion = " ".join(finding.suggestion.split()) if finding.suggestion else ""
        comment = f"{ANNOTATION_PREFIX}{finding.rule} {message}" + (f"; suggestion: {suggestion}" if suggestion else "")
        comments = by_statement.setdefault(statement, [])
        if comment not in comments:
            comments.append(comment)

    def annotate(comments: list[str], first: bool):
        def apply(node):
            existing = {line.comment.value for line in node.leading_lines if line.comment is not None}
            if first:
                existing |= header
            new = [cst.EmptyLine(comment=cst.Comment(c)) for c in comments if c not in existing]
            return node.with_changes(leading_lines=[*node.leading_lines, *new]) if new else node

        return apply

    return [
        Edit("annotate:", statement, statement, "", False, replacement=annotate(comments, statement is ctx.module.body[0]))
        for statement, comments in by_statement.items()
    ]


RUNTIME_MODULE = "npu_runtime"
#: The rule whose only use of npu_runtime (``install()``) can be skipped where it is missing.
RUNTIME_RULE = "NPU701"


def _first_torch_import(module: cst.Module) -> int | None:
    for index, stmt in enumerate(module.body):
        if any(name == "torch" or name.startswith("torch.") for name in imports.imported_modules(stmt)):
            return index
    return None


def _add_imports(ctx: FileContext, new_module: cst.Module, edits: list[Edit], active) -> tuple[cst.Module, Fix | None]:
    fixed_rules = {e.rule for e in edits}
    needed = []
    # npu_runtime imported only for NPU701's install(): guarded, so the entry point
    # still starts where npu-runtime is missing (npu_migrate/python/imports.py)
    runtime_guarded = {r.rule for r in ctx.import_requests
                       if r.module == RUNTIME_MODULE and r.rule in fixed_rules} == {RUNTIME_RULE}
    for request in ctx.import_requests:
        if request.rule not in fixed_rules:
            continue
        if runtime_guarded and request.module == RUNTIME_MODULE:
            continue
        if request.obj is not None and not request.module.startswith(".") and not imports.imports_from(
            new_module, request.module
        ):
            # `from torch.utils.data.distributed import DistributedSampler`: into the block of
            # the file's torch imports, after its plain imports, in isort order
            alias = f" as {request.asname}" if request.asname else ""
            code = f"from {request.module} import {request.obj}{alias}\n"
            placed = imports.insert_import(new_module, request.module, code, near=request.module.split(".", 1)[0])
            if placed is not None:
                new_module = placed
                continue
        if request.obj is None and request.asname is None:
            # `import torch`, `import torch.distributed`: next to the imports of its package
            if imports.imports_plainly(new_module, request.module):
                continue
            code = f"import {request.module}\n"
            placed = imports.insert_import(new_module, request.module, code, near=request.module.split(".", 1)[0])
            if placed is None:  # a package of its own (npu_runtime): the third-party block of torch
                placed = imports.insert_import(new_module, request.module, code, near="torch")
            if placed is None:  # no torch import: the file's first third-party block
                near = imports.third_party_neighbour(
                    new_module.body, lambda dotted: ctx.facts.is_project_module(ctx.path, dotted))
                if near is not None:
                    placed = imports.insert_import(new_module, request.module, code, near=near)
            if placed is not None:
                new_module = placed
                continue
        needed.append((request.module, request.obj, request.asname))
    import_fix = None
    needs_npu = any(compared.needs_import(ctx, e) for e in edits) or ctx.uses_npu_unimported is not None
    # A file that imports nothing (an mmcv/mmengine config of plain data such as
    # `dist_params = dict(backend="nccl")`) has only strings changed: whoever reads them
    # imports torch, and torch_npu with it. It gets no import. (A file that imports no
    # torch but calls a library with device "npu", as NPU923's timm NativeScaler, does.)
    # A file whose own guard goes on without torch_npu and leaves `torch.npu` unbound
    # (`except: torch_npu = None`) gets the tool's guard too, where the output uses NPU
    # names that need a stand-in there: it binds them, and re-imports nothing new.
    optional = ctx.imports.imports_module("torch_npu") and imports.torch_npu_optional(ctx.module)
    if needs_npu and IMPORT_RULE in active and (optional or not ctx.imports.imports_module("torch_npu")) and \
            _IMPORTS_ANYTHING.search(ctx.text) and not (optional and not imports.stand_ins_needed(new_module, ctx.quote)):
        original = _first_torch_import(ctx.module)
        where = ctx.position(ctx.module.body[original]) if original is not None else None
        line, end = (where.start.line, where.end) if where is not None else (1, None)
        if any(compared.needs_import(ctx, e) for e in edits):
            message = "added `import torch_npu`, which registers the npu device"
        else:
            message = f"added `import torch_npu`: the file uses {ctx.uses_npu_unimported} without it"
        import_fix = Fix(line, 0, IMPORT_RULE, message, end.line if end else 1, end.column if end else 0)
        # guarded in every file: it still imports where torch_npu is absent (npu_migrate/python/imports.py)
        from npu_migrate.pipeline.requirements import admits_below, admits_only_below

        old_torch = admits_only_below(ctx.facts.torch_specifier, "2.0")  # no rename_privateuse1_backend there
        new_module = imports.insert_torch_npu(new_module, ctx.quote, old_torch,
                                              amp_before_2_4=admits_below(ctx.facts.torch_specifier, "2.4"),
                                              other_backend=ctx.facts.privateuse1_package or None)
    if runtime_guarded and not imports.imports_plainly(new_module, RUNTIME_MODULE):
        from npu_migrate.pipeline import runtime_bundle

        new_module = imports.insert_runtime_guard(new_module, runtime_bundle.install_hint())
    if needed:
        # libcst.codemod pulls in libcst.matchers (~0.13 s of import time): only when needed.
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor

        context = CodemodContext()
        for module, obj, asname in needed:
            AddImportsVisitor.add_needed_import(context, module, obj, asname)
        new_module = add_imports_at_top(AddImportsVisitor(context), new_module)
    return new_module, import_fix


def _is_single_import(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
    )


def _is_docstring_or_strict(statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if isinstance(small, cst.Expr):
        return isinstance(small.value, cst.SimpleString)
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == "__strict__"
    )


def add_imports_at_top(visitor, module: cst.Module) -> cst.Module:
    """Run libcst's AddImportsVisitor on the head of the module only.

    It reads and rewrites nothing but the leading docstring, the import block
    right after it and the first statement after that block (where it inserts),
    yet it walks and rebuilds the whole tree twice; on a large file that cost
    more than everything else. The tail is put back unchanged.
    ``tests/engine/test_add_imports.py`` compares this with a whole-module run.
    """
    body = module.body
    end = 1 if body and _is_docstring_or_strict(body[0]) else 0
    while end < len(body) and _is_single_import(body[end]):
        end += 1
    head = _run_codemod(visitor, module.with_changes(body=body[: end + 1]))
    return head.with_changes(body=[*head.body, *body[end + 1 :]])


def _run_codemod(transformer, module: cst.Module) -> cst.Module:
    """``Codemod.transform_module`` without its defensive deep copy of the tree
    (the tree is ours and freshly built; the copy cost more than the visit)."""
    from dataclasses import replace

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    transformer.context = replace(transformer.context, wrapper=wrapper)
    with transformer.resolve(wrapper):
        return wrapper.module.visit(transformer)


def _paths_to(ctx: FileContext, edits: list[Edit]) -> set[cst.CSTNode] | None:
    """The edited nodes and their ancestors (None: some node's ancestors are unknown)."""
    path: set[cst.CSTNode] = {ctx.module}
    for edit in edits:
        node = edit.node
        if node is not ctx.module and ctx.parent(node) is None:
            return None
        path.add(node)
        path.update(ctx.ancestors(node))
    return path


def _to_fix(ctx: FileContext, edit: Edit) -> Fix:
    where = ctx.position(edit.anchor)
    return Fix(where.start.line, where.start.column, edit.rule, edit.message, where.end.line, where.end.column,
               reason=edit.reason)


def _to_findings(ctx: FileContext, findings: list[FindingRecord]) -> list[Finding]:
    out = []
    for f in findings:
        where = ctx.position(f.node)
        out.append(Finding(where.start.line, where.start.column, f.rule, f.message, f.suggestion,
                           where.end.line, where.end.column))
    return _one_per_place(out)


def _one_per_place(items: list) -> list:
    """Sorted, and one per start position and text, whichever node a rule recorded it on."""
    out: dict[tuple, object] = {}
    for item in sorted(items, key=lambda i: (i.line, i.col, i.rule, i.message, getattr(i, "suggestion", ""), i.end)):
        out.setdefault((item.line, item.col, item.rule, item.message, getattr(item, "suggestion", "")), item)
    return list(out.values())
