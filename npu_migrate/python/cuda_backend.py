"""Code that *is* CUDA's (or another backend's) own implementation, or a fallback
for a missing NPU namespace: left byte-identical by every rule (docs/decisions.md,
"What reaches torch", "Another backend's implementation").

A library that supports several accelerators holds code that exists *for* CUDA:
its override of ``Module.cuda()``, its CUDA/ROCm platform or accelerator class
(``CUDAAccelerator``, ``CudaPlatform``, ``DeviceGPU``, ``platform_cuda.py``), its
ROCm detection (``torch.version.hip``, ``gcnArchName``), a per-platform dispatch
branch that picks CUDA's table (``if device_type == "cuda": CUDA_PATCH_MAP``), the
branch taken when ``torch.npu`` is missing (``except AttributeError: return
torch.cuda``), a ``cuda_support = ...`` flag beside its own ``npu_support = ...``.
Renaming that code does not port it: it makes the CUDA implementation a second,
wrong NPU one. The engine drops every rewrite inside such a region; the region is
reported once (NPU010, or NPU011 for a skip gate of CUDA-kernel tests).

:func:`region` answers for one node; :func:`partial_chains` finds the ``and``/``or``
chains that only part of the edits would rewrite (all or nothing).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Collection

import libcst as cst

from npu_migrate.pipeline.file_roles import is_test_path
from npu_migrate.python.context import FileContext
from npu_migrate.python.cst_util import last_name, string_value

#: a class that is CUDA's/ROCm's own implementation of a device abstraction
CUDA_CLASS = re.compile(
    r"^(?=\w*(?:CUDA|Cuda|ROCm|Rocm|ROCM|HIP(?=[A-Z_]|$)|Hip(?=[A-Z_]|$)))"
    r"\w*(?:Accelerator|Platform|Device|Backend|Patched|Patch)\w*$"  # CUDAAccelerator, CudaPlatform, CUDAPatchedLlama
    r"|^\w*(?:Accelerator|Platform|Device|Backend)_?(?:GPU|Gpu|CUDA|Cuda|ROCm|Rocm|ROCM)$"  # DeviceGPU, PlatformCUDA
    r"|^(?:GPU|Gpu|Nvidia|NVIDIA)_?(?:Accelerator|Platform|Device)$"
)
#: a module that is one backend's implementation: platform_cuda.py, accelerators/cuda.py
BACKEND_FILE = re.compile(
    r"(?:^|/)(?:(?:platform|accelerator|device|backend)s?_(?:cuda|rocm|hip)"
    r"|(?:cuda|rocm|hip)_(?:platform|accelerator)s?"
    r"|(?:platforms?|accelerators?)/(?:cuda|rocm|hip|gpu))\.py$"
)
#: a module written for Ascend: a folder named for the NPU (ms-swift's
#: ``swift/model/npu_patch/``, liger's ``ops/backends/_ascend/``). Not a file's own name:
#: ``npu_aware_probe.py`` may still hold CUDA code to migrate.
NPU_FILE = re.compile(r"(?:^|[/_.-])(?:npu|ascend)(?=[/_.-])", re.IGNORECASE)
#: CUDA-only mechanisms named in a device test or the branch it guards: CUDA IPC (sharing
#: device memory across processes; torchrl's `_platform_supports_cuda_ipc()`), CUDA graphs
#: (`"cuda_graph" in variant`; torch_npu's graphs are another API), NVSHMEM, NVML
_CUDA_FEATURE = re.compile(r"cuda_?ipc|cuda_?graphs?\b|cudagraphs?\b|CUDAGraph|nvshmem|pynvml|\bnvml", re.IGNORECASE)
#: ROCm-only values: a statement reading them is ROCm code
ROCM_VALUE = re.compile(r"\bHIP_VISIBLE_DEVICES\b|\bROCR_VISIBLE_DEVICES\b|\bgcnArchName\b")
#: ROCm/HIP detection: an ``and`` operand telling an AMD GPU apart from an NVIDIA one
#: (also by vendor name: verl's ``device == "cuda" and vendor != "nvidia"``)
ROCM_TEST = re.compile(r"""["'](?:nvidia|amd)["']|\bHIP_VISIBLE_DEVICES\b|\bROCR_VISIBLE_DEVICES\b|\bversion\.hip\b|\bgcnArchName\b|\bis_hip\b|\bIS_ROCM\w*|\bis_rocm\w*|\brocm_\w+\(""", re.IGNORECASE)
#: an identifier naming CUDA's own implementation (CUDA_PATCH_MAP, CUDAPatchedLlama)
CUDA_IDENTIFIER = re.compile(r"\b\w*(?:CUDA(?:_|[A-Z][a-z])|Cuda[A-Z])\w*")
#: exceptions raised when the NPU namespace (torch.npu, torch_npu) is missing
_MISSING = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError"})
_NPU = re.compile(r"(?<![a-z])npu", re.IGNORECASE)
#: skip reasons that say the test exercises a CUDA kernel
KERNEL_REASON = re.compile(r"triton|kernel|cutlass|\bcute\b|cudnn|fused|\bmx\b|flash|varlen|cuda graph|helion", re.IGNORECASE)
_SKIPS = frozenset({"skipif", "skipIf", "skipUnless", "skip_if", "skip_unless"})

#: a library's own CUDA detection function (accelerate's ``is_cuda_available()``)
_CUDA_PROBE = re.compile(r"_*is_(?:torch_)?(?:cuda|rocm|hip)_available")
ENV_RULE = "NPU106"
#: code that *reads* ROCm's visible-device variables to reconcile them with CUDA's (verl's
#: worker); one that only clears them all (trl's `_scrub_child_env`) hides every vendor's GPUs
_READS_ROCM_ENV = re.compile(r"""(?:get|pop|getenv)\(\s*["'](?:HIP|ROCR)_VISIBLE_DEVICES""")
KERNEL_GATE = "NPU011"
AWARE = "NPU010"

#: a path or module name about kernels (``tests/kernels/``, ``test_fused_rope.py``,
#: ``liger_kernel``, ``axolotl.kernels.lora``)
_KERNEL_NAME = re.compile(r"kernel|triton|cutlass|cutile|(?<![a-z])cute(?![a-z])|fused", re.IGNORECASE)
#: an import of Triton, or of a module whose dotted name is about kernels
_KERNEL_IMPORT = re.compile(r"^[ \t\f]*(?:import|from)[ \t\f]+([\w.]+)", re.MULTILINE)


@functools.lru_cache(maxsize=4096)
def _written_for_ascend(path: str) -> bool:
    """The file's path inside its project (:func:`~npu_migrate.pipeline.config.project_root`,
    so a checkout under ``/home/npu/`` does not count, and every way of naming the file
    gives the same answer) names the NPU."""
    from npu_migrate.pipeline.config import project_root

    inside = os.path.relpath(os.path.abspath(path), project_root(path))
    folders = "/".join(inside.replace(os.sep, "/").split("/")[:-1])  # not the file's own name
    return bool(folders) and NPU_FILE.search("/" + folders + "/") is not None


def kernel_module(ctx: FileContext) -> bool:
    """A library module of the project's own kernels: Triton/Helion/CuPy code (the project
    facts' CUDA-only files) in a file whose path inside its project is about kernels
    (unsloth's ``unsloth/kernels/rms_layernorm.py``, liger's ``liger_kernel/ops/``), with
    no ``__main__`` block (a script that defines a kernel is still a script)."""
    from npu_migrate.pipeline.facts import module_file

    if not ctx.facts.is_cuda_only_file(module_file(ctx.path)) or "__main__" in ctx.text:
        return False
    return _KERNEL_NAME.search(_inside_project(ctx.path)) is not None


@functools.lru_cache(maxsize=4096)
def _inside_project(path: str) -> str:
    """``path`` from its project's root, and at least from the top of its package chain
    (a wheel's tree has no project marker: ``unsloth/kernels/rms_layernorm.py``)."""
    from npu_migrate.pipeline.config import project_root

    absolute = os.path.abspath(path)
    top = os.path.dirname(absolute)
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    root = project_root(path)
    base = root if len(root) < len(top) else top
    return os.path.relpath(absolute, base).replace(os.sep, "/")


def kernel_test_module(ctx: FileContext) -> bool:
    """A test module of CUDA/Triton kernels (axolotl's ``tests/kernels/test_gemma4_fused_rope.py``,
    a test that imports ``triton`` or ``pkg.kernels``): its CUDA tests, availability
    probes and device strings exist to run CUDA kernels; on Ascend those tests are to be
    skipped, which they are while their gates stay CUDA tests. Rewriting them runs NPU
    tensors into the CUDA kernels (wrong) or edits tests that skip anyway (needless)."""
    path = ctx.path.replace("\\", "/")
    if not is_test_path(ctx.path):
        return False
    parts = path.split("/")
    below = max((i for i, part in enumerate(parts) if part in ("tests", "test")), default=len(parts) - 2)
    if any(_KERNEL_NAME.search(part) for part in parts[below + 1:]):  # the folders below tests/, the file
        return True
    # an import of Triton, of a module named for kernels, or of a module of this project
    # that is Triton/Helion code (axolotl's test of `monkeypatch.attention.flash_attn_d512`)
    if any(_KERNEL_NAME.search(name) or ctx.facts.is_cuda_only_module(name)
           for name in _KERNEL_IMPORT.findall(ctx.text)):
        return True
    return _skipped_as_kernel_tests(ctx)


def _skipped_as_kernel_tests(ctx: FileContext) -> bool:
    """The module's own ``pytestmark`` skips it without CUDA for a kernel's sake
    (``skipif(not torch.cuda.is_available(), reason="varlen_attn needs CUDA")``): every
    test in it is a kernel test."""
    tree = ctx.python_ast() if "pytestmark" in ctx.text else None
    for statement in tree.body if tree is not None else ():
        if not (isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                          for t in statement.targets)):
            continue
        for node in ast.walk(statement.value):
            if not isinstance(node, ast.Call) or "cuda" not in ast.unparse(node.args[0] if node.args else node):
                continue
            reasons = [k.value.value for k in node.keywords if k.arg == "reason" and isinstance(k.value, ast.Constant)
                       and isinstance(k.value.value, str)]
            if any(KERNEL_REASON.search(reason) for reason in reasons):
                return True
    return False


def file_region(ctx: FileContext) -> tuple[str, str] | None:
    """``(rule, message)`` when the whole file is left alone: another backend's module, a
    module of the project's kernels, one written for Ascend, a test module of kernels."""
    if BACKEND_FILE.search(ctx.path.replace("\\", "/")):
        return AWARE, "this module is one backend's implementation (CUDA/ROCm); left unchanged"
    if kernel_module(ctx):
        return (KERNEL_GATE, "a module of this project's Triton/CUDA kernels (Triton code in a file named for "
                "kernels): its device code exists for those kernels; left unchanged")
    if NPU_FILE.search(ctx.path) and _written_for_ascend(ctx.path):
        return AWARE, "this module is written for Ascend (its path names the NPU); left unchanged"
    if kernel_test_module(ctx):
        return (KERNEL_GATE, "a test module of CUDA/Triton kernels: its CUDA gates and devices stay CUDA's, so on "
                "NPU its kernel tests are skipped, not run on NPU tensors; left unchanged")
    return None


def region(ctx: FileContext, node: cst.CSTNode, rule: str | None = None) -> tuple[cst.CSTNode, str, str, bool] | None:
    """``(owner, rule, message, whole)`` when ``node`` lies in code left alone; ``whole``:
    the owner is a class, method or file, whose other findings are dropped too (one
    report for it)."""
    whole_file = file_region(ctx)
    if whole_file is not None:
        return (ctx.module, *whole_file, True)
    child = node
    statement_seen = None
    if rule == ENV_RULE:
        # CUDA_VISIBLE_DEVICES in a function that reconciles it with ROCm's HIP/ROCR variables
        function = next((a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
        if function is not None and _READS_ROCM_ENV.search(ctx.module.code_for_node(function)):
            return (function, AWARE, "CUDA_VISIBLE_DEVICES handled beside ROCm's HIP/ROCR_VISIBLE_DEVICES "
                    "(GPU-vendor environment handling); left unchanged", False)
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef) and _CUDA_PROBE.fullmatch(ancestor.name.value):
            return (ancestor, AWARE, f"`{ancestor.name.value}()` is this library's CUDA detection (it answers "
                    "for CUDA, beside its own NPU detection); left unchanged", True)
        if isinstance(ancestor, cst.FunctionDef) and ancestor.name.value == "cuda" and _in_class(ctx, ancestor):
            return (ancestor, AWARE, "the class's own `cuda()` override (it implements Module.cuda for this class); "
                    "left unchanged", True)
        if isinstance(ancestor, cst.ClassDef) and CUDA_CLASS.search(ancestor.name.value):
            return (ancestor, AWARE, f"`{ancestor.name.value}` is CUDA's (or ROCm's) own implementation in this "
                    "library; left unchanged", True)
        if isinstance(ancestor, cst.ExceptHandler) and _catches_missing(ancestor):
            attempt = ctx.parent(ancestor)
            if isinstance(attempt, cst.Try):
                body = ctx.module.code_for_node(attempt.body)
                if "getattr(torch" in body or _NPU.search(body):
                    return (ancestor, AWARE, "the fallback taken when the NPU namespace is missing; left unchanged",
                            False)
        if isinstance(ancestor, cst.BooleanOperation) and isinstance(ancestor.operator, cst.And):
            rocm = _rocm_operand(ctx, ancestor)
            if rocm is not None:
                return rocm, AWARE, "a ROCm/HIP detection (it tells AMD GPUs apart); left unchanged", False
        if isinstance(ancestor, cst.If) and child is ancestor.body and ROCM_TEST.search(
                ctx.module.code_for_node(ancestor.test)):
            # `if torch.version.hip:` ... : the branch runs on ROCm only (unsloth's HIP wavefront probe)
            return ancestor.body, AWARE, "code of a branch taken on ROCm/HIP only; left unchanged", False
        if isinstance(ancestor, (cst.If, cst.While)) and child is ancestor.test:
            test = ctx.module.code_for_node(ancestor.test)
            if ROCM_VALUE.search(test):
                return ancestor.test, AWARE, "a ROCm/HIP detection (it tells AMD GPUs apart); left unchanged", False
            if isinstance(ancestor, cst.If) and _requires_cuda(ctx, ancestor):
                return (ancestor.test, KERNEL_GATE, "a CUDA-only requirement (its error names CUDA); left as a "
                        "CUDA test, so on NPU it raises as the code's authors meant", False)
            if isinstance(ancestor, cst.If) and _names_cuda_implementation(ancestor.body):
                return (ancestor.test, AWARE, "a per-platform dispatch: this branch selects CUDA's own "
                        "implementation; left unchanged", False)
            if isinstance(ancestor, cst.If) and (feature := _CUDA_FEATURE.search(
                    ctx.module.code_for_node(ancestor.test) + ctx.module.code_for_node(ancestor.body))):
                return (ancestor.test, KERNEL_GATE, f"a check for a CUDA-only mechanism (`{feature.group()}`); "
                        "left as a CUDA test, so on NPU that mechanism is not used", False)
        if isinstance(ancestor, cst.SimpleStatementLine) and statement_seen is None:
            statement_seen = ancestor
            text = ctx.module.code_for_node(ancestor)
            if ROCM_VALUE.search(text):
                return ancestor, AWARE, "a ROCm/HIP detection (it tells AMD GPUs apart); left unchanged", False
            sibling = _npu_sibling(ctx, ancestor)
            if sibling is not None:
                return (ancestor, AWARE, f"a CUDA flag beside this code's own NPU flag `{sibling}`; left unchanged",
                        False)
        if isinstance(ancestor, cst.Call) and last_name(ancestor.func) in _SKIPS:
            reason = " ".join(v for a in ancestor.args if (v := _text(a.value)))
            if KERNEL_REASON.search(reason):
                return (ancestor, KERNEL_GATE, "a skip gate of tests of CUDA kernels (its reason says so); left as a "
                        "CUDA test, so on NPU these tests are skipped", False)
        child = ancestor
    return None


def _rocm_operand(ctx: FileContext, chain: cst.BooleanOperation) -> cst.CSTNode | None:
    """The whole ``and`` chain that ``chain`` belongs to, when one of its operands is a
    ROCm test (``torch.version.hip is not None and torch.cuda.is_available()``)."""
    top = chain
    parent = ctx.parent(top)
    while isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And):
        top, parent = parent, ctx.parent(parent)
    operands, stack = [], [top]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And):
            stack += [node.left, node.right]
        else:
            operands.append(node)
    def positive(operand: cst.CSTNode) -> bool:
        # `torch.version.hip is not None`, `is_rocm()`; not `torch.version.hip is None` nor
        # `not is_rocm()` (a CUDA-not-ROCm test: the CUDA code beside it is torch's)
        text = ctx.module.code_for_node(operand)
        if isinstance(operand, cst.UnaryOperation) or re.search(r"\bis\s+None\b|==\s*None\b", text):
            return False
        return ROCM_TEST.search(text) is not None

    return top if any(positive(o) for o in operands) else None


def _requires_cuda(ctx: FileContext, branch: cst.If) -> bool:
    """``if x.device.type != "cuda": raise ValueError("sonicmoe requires CUDA device")``:
    a negative test whose whole body raises an error that names CUDA."""
    test = branch.test
    negative = (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)) or (
        isinstance(test, cst.Comparison) and all(isinstance(t.operator, (cst.NotEqual, cst.NotIn, cst.IsNot))
                                                 for t in test.comparisons))
    body = branch.body.body if isinstance(branch.body, cst.IndentedBlock) else ()
    if not negative or branch.orelse is not None or len(body) != 1:
        return False
    statement = body[0]
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if not isinstance(small, cst.Raise) or small.exc is None:
        return False
    message = ctx.module.code_for_node(small.exc)
    if re.search(r"\bCUDA\b", message) is None:
        return False
    # a CUDA *kernel's* requirement: the message or the module says kernel (torchtune's
    # "activation offloading only when training on CUDA" is a device choice the NPU meets)
    return KERNEL_REASON.search(message) is not None or KERNEL_REASON.search(ctx.path.replace("\\", "/")) is not None


def _names_cuda_implementation(body: cst.CSTNode) -> bool:
    """``body`` names an identifier of CUDA's own implementation (``CUDA_PATCH_MAP``,
    ``CUDAPatchedLlama``): a name or attribute, not a string (``"CUDA_VISIBLE_DEVICES"``)."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or CUDA_IDENTIFIER.fullmatch(node.value) is not None

    body.visit(_Find())
    return found


def _text(node: cst.CSTNode) -> str | None:
    value = string_value(node)
    if value is not None:
        return value
    if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
        return "".join(p.value for p in _parts(node))
    return None


def _parts(node):
    if isinstance(node, cst.ConcatenatedString):
        yield from _parts(node.left)
        yield from _parts(node.right)
    elif isinstance(node, cst.FormattedString):
        yield from (p for p in node.parts if isinstance(p, cst.FormattedStringText))
    elif isinstance(node, cst.SimpleString):
        yield type("T", (), {"value": string_value(node) or ""})()


def _in_class(ctx: FileContext, function: cst.FunctionDef) -> bool:
    parent = ctx.parent(function)
    return isinstance(parent, cst.IndentedBlock) and isinstance(ctx.parent(parent), cst.ClassDef)


def _catches_missing(handler: cst.ExceptHandler) -> bool:
    kind = handler.type
    if kind is None:
        return False
    names = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    return any(last_name(n) in _MISSING for n in names)


def _npu_sibling(ctx: FileContext, statement: cst.SimpleStatementLine) -> str | None:
    """``cuda_support = ...`` in a scope that also assigns ``npu_support``: the name of
    that NPU flag."""
    small = statement.body[0] if statement.body else None
    if not isinstance(small, (cst.Assign, cst.AnnAssign)):
        return None
    target = small.targets[0].target if isinstance(small, cst.Assign) else small.target
    if not isinstance(target, cst.Name) or not re.search(r"cuda", target.value, re.IGNORECASE):
        return None
    sibling = re.sub(r"cuda", "npu", target.value, flags=re.IGNORECASE)
    block = ctx.parent(statement)
    if block is None:
        return None
    assigned = re.compile(rf"^\s*{re.escape(sibling)}\s*(?::[^=\n]*)?=(?!=)", re.IGNORECASE | re.MULTILINE)
    return sibling if assigned.search(ctx.module.code_for_node(block)) else None


def partial_chains(ctx: FileContext, edits, line) -> set[int]:
    """Ids of edits that sit in an ``and``/``or`` chain holding a ``torch.cuda`` term no
    edit rewrites (``torch.cuda.nccl.version()``): the chain is rewritten all or nothing."""
    covered: set[cst.CSTNode] = set()
    for edit in edits:
        covered.add(edit.node)
        covered.add(edit.anchor)
    dropped: set[int] = set()
    for edit in edits:
        chain = None
        for ancestor in ctx.ancestors(edit.anchor):
            if isinstance(ancestor, cst.BooleanOperation):
                chain = ancestor
            elif isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda, cst.Arg)):
                break
        if chain is None:
            continue
        if any(not _is_covered(ctx, term, covered) for term in _cuda_terms(ctx, chain)):
            dropped.add(id(edit))
    return dropped


def _cuda_terms(ctx: FileContext, chain: cst.BooleanOperation) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if (ctx.qualified_name(node) or "").startswith("torch.cuda."):
                found.append(node)
                return False
            return True

    chain.visit(_Find())
    return found


def _is_covered(ctx: FileContext, node: cst.CSTNode, covered: Collection[cst.CSTNode]) -> bool:
    if node in covered:
        return True
    if any(a in covered for a in ctx.ancestors(node)):
        return True

    inside = False

    class _Find(cst.CSTVisitor):
        def on_visit(self, inner: cst.CSTNode) -> bool:
            nonlocal inside
            if inner in covered:
                inside = True
            return not inside

    node.visit(_Find())
    return inside
