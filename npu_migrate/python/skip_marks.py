"""The project's own CUDA skip marks: test decorators that stay CUDA tests after the migration.

A project's testing helpers often define its GPU skip marks once (OLMo-core's
``olmo_core/testing/utils.py``)::

    has_cuda = torch.cuda.is_available()
    compute_capability = torch.cuda.get_device_capability()[0] if has_cuda else None
    GPU_MARKS = (pytest.mark.gpu, pytest.mark.skipif(not has_cuda, reason="Requires a GPU"))

    def requires_gpu(func):
        for mark in GPU_MARKS:
            func = mark(func)
        return func

and every test module imports ``requires_gpu``. Whether those tests run on Ascend is
decided in the helper module: where the migration keeps ``has_cuda`` a CUDA test (here
because it also gates a compute-capability probe, NPU011), every test it marks is
skipped on Ascend, and rewriting the devices in their bodies serves nothing (held-out
round 13: 112 of 115 hunks in OLMo-core's tests). Where the flag becomes an NPU test,
the marked tests run on the NPU and are migrated as usual.

So the project facts list the few modules that may define such marks (a module-level
``pytest.mark.skipif`` over ``torch.cuda``, or a function named ``requires_*``; read as
bytes, :data:`npu_migrate.pipeline.facts.ProjectFacts.skip_mark_modules`, with their
digests in the facts key, so cached results follow the helper modules), and this module
runs the Python migration on them, once per process, and keeps the names whose
condition, in the *migrated* module, still tests CUDA. A name defined more than once in
the project is not kept (a test module cannot be told which one it imports).
"""

from __future__ import annotations

import ast
import functools
import re

_CUDA_TEST = re.compile(r"\btorch\.cuda\.(?:is_available|device_count)\s*\(")


def project_cuda_skip_marks(facts) -> frozenset[str]:
    """The CUDA skip marks of the project ``facts`` describe (names defined once)."""
    if not facts.skip_mark_modules:
        return frozenset()
    return _marks_of(facts.skip_mark_modules)


@functools.lru_cache(maxsize=64)
def _marks_of(modules: tuple[tuple[str, str], ...]) -> frozenset[str]:
    counts: dict[str, int] = {}
    for path, _digest in modules:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        for name in kept_cuda_marks(path, data):
            counts[name] = counts.get(name, 0) + 1
    return frozenset(name for name, count in counts.items() if count == 1)


def kept_cuda_marks(path: str, data: bytes) -> set[str]:
    """Names of module-level skip marks (or mark tuples, or decorator functions applying
    them) of the module at ``path`` whose skip condition still tests CUDA once the
    module is migrated."""
    from npu_migrate.pipeline.filetypes import PYTHON
    from npu_migrate.pipeline.settings import Settings
    from npu_migrate.python.cuda_only import CUDA_ONLY_WORDS

    # migrated as the pipeline migrates any Python file (through its file type, as the
    # runner does), with no project facts: so no helper module is read from inside this one
    result = PYTHON.migrate()(path, data, Settings())
    source = result.new_source if result.new_source is not None else data
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    values: dict[str, ast.AST] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            values[statement.targets[0].id] = statement.value
        elif isinstance(statement, ast.FunctionDef):
            functions[statement.name] = statement
    flags = {name: value for name, value in values.items() if not _marks(value)}

    def cuda_condition(condition: ast.AST, depth: int = 0) -> bool:
        text = ast.unparse(condition)
        if _CUDA_TEST.search(text) or CUDA_ONLY_WORDS.search(text):
            return True  # a CUDA test the migration kept, or a package that has no Ascend build
        if depth > 4:
            return False
        return any(cuda_condition(flags[n.id], depth + 1) for n in ast.walk(condition)
                   if isinstance(n, ast.Name) and n.id in flags)

    def skips_on_cuda(node: ast.AST, seen: frozenset[str] = frozenset()) -> bool:
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and _is_skipif(call.func) and call.args and cuda_condition(call.args[0]):
                return True
            # a tuple of marks named in another (`requires_gpu` applying GPU_MARKS); `seen`
            # ends names that refer to each other
            if isinstance(call, ast.Name) and call.id in values and call.id not in seen \
                    and _marks(values[call.id]) and skips_on_cuda(values[call.id], seen | {call.id}):
                return True
        return False

    kept = {name for name, value in values.items() if _marks(value) and skips_on_cuda(value)}
    kept |= {name for name, function in functions.items() if skips_on_cuda(function)}
    return kept


def _is_skipif(func: ast.AST) -> bool:
    return isinstance(func, ast.Attribute) and func.attr in ("skipif", "skipIf", "skipUnless")


def _marks(value: ast.AST) -> bool:
    """A skip mark, or a tuple/list of marks (``(pytest.mark.gpu, pytest.mark.skipif(...))``)."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_marks(element) for element in value.elts)
    return isinstance(value, ast.Call) and _is_skipif(value.func)
