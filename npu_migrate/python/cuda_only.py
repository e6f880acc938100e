"""CUDA-only code, and the device tests that gate it (NPU011).

Real code often dispatches on the device: a compiled kernel for CUDA tensors, a
pure-PyTorch path for the rest::

    if boxes.is_cuda:
        keep = _C.nms(boxes, scores, threshold)      # CUDA kernel
    else:
        keep = torchvision.ops.nms(boxes, scores, threshold)

Rewriting that test to ``boxes.is_npu`` sends NPU tensors into the CUDA kernel.
Such a *gate* must stay as it is: on NPU the test is false and the fallback runs.
This module decides both halves, for the engine (which drops the rewrite of the
gate and reports it as NPU011) and for anyone else who needs to know.

**What is CUDA-only code** (:func:`classify_name`, the one table; every name is
resolved through the file's imports first):

* a package an NPU9xx rule reports as CUDA-only (flash-attn, xformers, apex,
  Triton, CuPy/PyCUDA, bitsandbytes, NVML, DALI, TensorRT, Transformer Engine,
  DeepSpeed's CUDA ops), read from those rules' ``packages``;
* ``torch.nn.DataParallel`` / ``data_parallel`` (it cannot replicate across NPUs)
  where NPU510 leaves it (see :data:`MIGRATED_BY`),
  ``torch.utils.cpp_extension.CUDAExtension``, torch's own CUDA bindings
  (``torch._C._cuda_*``, ``torch._C._nccl_*``) and custom operators outside torch's
  namespaces (``torch.ops.my_ext.op``);
* a compiled extension by its module name: a ``_C`` module (``from detectron2
  import _C``, ``amp_C``), a module named like ``*_cuda``/``cuda_*``
  (``fused_layer_norm_cuda``, ``alignment_train_cuda_binding``); and code of a
  module named ``cuda`` or ``gpu`` (``numba.cuda.jit``, ``lib.gpu.nms``, a
  package's ``accelerators.cuda`` helpers);
* a module of the project that is Triton or CuPy code (project facts: it imports
  triton/cupy/pycuda at module level or defines ``@triton.jit`` kernels; a
  package whose ``__init__`` re-exports one counts too);
* in the file itself: ``@triton.jit``/``autotune``/``heuristics`` kernels, module
  level aliases of CUDA-only code (``roi_align = _ROIAlign.apply``), a
  ``cpp_extension.load(...)`` of CUDA sources, and functions and classes that use
  CUDA-only code without testing the device themselves (wrappers, autograd
  Functions). DataParallel and CUDAExtension do not make their callers CUDA-only.

**What is a gate**: a CUDA test (``x.is_cuda``, ``x.device.type == "cuda"``,
``torch.cuda.is_available()``, ...) in the test of an ``if`` or a conditional
expression whose guarded side uses CUDA-only code; in a flag assigned and later
tested (``fast = t.is_cuda`` ... ``if fast:``); or returned by a predicate that
is tested, or registered next to a CUDA-only implementation
(``register(checker=is_supported, impl=fused_kernel)``). The fallback is the
other side (``else``/``elif``, the code after an early ``return``, the rest of
the function), or nothing (the block is skipped).

A gate is *not* kept when its guarded side also does device work the migration
rewrites (``model.cuda()``, ``torch.cuda.set_device``) and there is no fallback:
skipping it on NPU would lose that work, so the test is rewritten as usual and
the CUDA-only code stays reported by its own rule.

The guarded side is read from CPython's ``ast`` of the whole file (never from the
reduced module elision parses), so results do not depend on the prefilter.

Plugging in a rewrite of CUDA-only code: a CUDA-only use on a line where a rule
listed in :data:`MIGRATED_BY` for its kind has a surviving edit is being migrated,
not left; a gate guarding only such uses is rewritten like any other test.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from npu_migrate.pipeline.cuda_builds import CPP_LOAD as _CPP_LOAD
from npu_migrate.pipeline.cuda_builds import builds_cuda as _builds_cuda
from npu_migrate.pipeline.cuda_builds import cuda_sources as _cuda_sources
from npu_migrate.pipeline.cuda_builds import dotted_name as ast_dotted_name  # noqa: F401 (re-exported)
from npu_migrate.python.context import FileContext
from npu_migrate.tables.packages import KERNEL_PACKAGES, NO_ASCEND_IMPORT  # noqa: F401 (re-exported)

# -- what counts as CUDA-only code ----------------------------------------------------

DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel",
)
KIND_DATA_PARALLEL = "DataParallel, which cannot replicate a model across NPUs"
KIND_EXTENSION_BUILD = "a CUDA C++ extension build"
KIND_TORCH_BINDING = "a CUDA-only binding of torch"
KIND_CUSTOM_OP = "a custom operator with no NPU kernel"
KIND_CUDA_OPERATOR = "an operator registered for CUDA devices only"
KIND_TORCH_CUDA_KERNEL = ("torch's CUDA-only kernels (flash/cuDNN attention, int4 weight packing), which torch_npu "
                          "2.13.0 does not register for the NPU")

#: torch functions that run only torch's CUDA attention kernels: varlen_attn calls
#: ``aten._flash_attention_forward`` (or ``_cudnn_attention_forward``); torch_npu 2.13.0
#: registers neither (``torch_npu/csrc/aten/npu_native_functions*.yaml``).
TORCH_CUDA_KERNELS = frozenset({
    "torch.nn.attention.varlen_attn", "torch.nn.attention.varlen.varlen_attn",
    "torch.nn.attention.varlen_attn_out", "torch.nn.attention.varlen.varlen_attn_out",
    # int4 weight-only matmul (gpt-fast's quantize.py): CUDA and CPU (`_for_cpu`) kernels only;
    # torch_npu has its own torch_npu.npu_convert_weight_to_int4pack / npu_weight_quant_batchmatmul
    "torch._convert_weight_to_int4pack", "torch._weight_int4pack_mm",
})
_ATEN_CUDA_ATTENTION = frozenset({
    "_flash_attention_forward", "_flash_attention_backward", "_cudnn_attention_forward",
    "_efficient_attention_forward", "_efficient_attention_backward", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_efficient_attention",
    "_convert_weight_to_int4pack", "_weight_int4pack_mm",
})
KIND_CAPABILITY_CHOOSER = ("a function of this project that picks the device by CUDA compute capability (its "
                           "capability test stays CUDA's, so on NPU it answers the CPU)")
KIND_NVIDIA_TOOL = ("a function of this project that reads NVIDIA's management tools (NVML, nvidia-smi), which "
                    "find no device on Ascend")
KIND_NCCL_COMMUNICATOR = "another library's NCCL communicator, which runs on CUDA only"
#: A module, class, object or attribute of another library's NCCL communicator: vLLM's
#: ``pynccl`` / ``PyNcclCommunicator`` / ``NCCLWeightTransferEngine``, CuPy's ``nccl``,
#: an RL framework's ``self._nccl_group``. Not torch's own NCCL process groups and their
#: options (``get_nccl_options``, ``nccl_comm_cfgs``), which HCCL replaces.
_NCCL_COMMUNICATOR = re.compile(
    r"^(?:_*py_?nccl\w*|_*nccl|\w*nccl\w*?(?:comm|comms|communicator|communicators|engine|group|groups))$",
    re.IGNORECASE)
KIND_COMPILED = "a compiled CUDA extension"
KIND_CUDA_MODULE = "code of a CUDA-specific module"
KIND_TRITON = "a Triton kernel"
KIND_PROJECT = "Triton/CuPy code of this project"
KIND_JIT_BUILD = "a JIT-built CUDA extension"
KIND_CAPABILITY = ("a CUDA compute-capability probe (on NPU, get_device_capability() returns None and "
                   "the device properties have no major/minor)")
KIND_CUDA_VERSION = "CUDA's toolkit version (`torch.version.cuda` is None on Ascend)"
KIND_KERNEL_PACKAGE = "a package of CUDA kernels"
KIND_CUDA_METHOD = "a method named for the class's CUDA path"
KIND_NAMED_PACKAGE = "a CUDA-only package or feature named by the test, its message or the value it picks"



def _module_level_imports(tree: ast.Module | None) -> Iterator[tuple[ast.Import | ast.ImportFrom, list[str]]]:
    """The module-level import statements of ``tree`` (not inside ``try``/``if``/a function;
    relative ones left out) with the dotted names each imports: ``import a.b, c`` gives
    ``a.b``, ``c``; ``from a.b import c, d`` gives ``a.b`` first, then ``a.b.c``, ``a.b.d``."""
    for statement in tree.body if tree is not None else ():
        if isinstance(statement, ast.Import):
            yield statement, [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            yield statement, [statement.module, *(f"{statement.module}.{alias.name}" for alias in statement.names)]


def import_blocker(tree: ast.Module | None, extensions: Collection[str] = ()) -> tuple[str, int] | None:
    """``(module, line)`` of the first import, among the module-level statements of
    ``tree`` (not inside ``try``/``if``/a function), of a package in
    :data:`NO_ASCEND_IMPORT` or of a compiled CUDA extension by its module name
    (``xentropy_cuda_lib``, ``fused_layer_norm_cuda``) or of one the project builds only as a
    ``CUDAExtension`` (``extensions``, :attr:`ProjectFacts.blocking_modules`): the module
    cannot be imported on Ascend at all."""
    for statement, names in _module_level_imports(tree):
        for name in names[:1] if isinstance(statement, ast.ImportFrom) else names:
            parts = name.split(".")
            if (any(_within(name, package) for package in (*NO_ASCEND_IMPORT, *extensions))
                    or (len(parts) == 1 and _compiled_part(parts[0], last=False) and parts[0] != "_C")):
                return name, statement.lineno
    return None

#: vLLM's engine: its workers, model runners and loaders, executors, scheduler, attention
#: backends and engine configuration. A module that imports these at module level extends
#: the engine (verl's vendored vLLM 0.3-0.6 workers and weight loaders, held-out round 20);
#: its tensors live on the engine's device, which on Ascend is vllm-ascend's platform's.
#: Not vLLM's client API (``from vllm import LLM, SamplingParams``, ``vllm.outputs``,
#: ``vllm.lora.request``, ``vllm.distributed.parallel_state``'s clean-up calls).
VLLM_ENGINE = ("vllm.worker", "vllm.model_executor", "vllm.executor", "vllm.core", "vllm.attention",
               "vllm.spec_decode", "vllm.config", "vllm.engine.llm_engine", "vllm.engine.output_processor",
               "vllm.compilation", "vllm.v1.worker", "vllm.v1.executor", "vllm.v1.attention", "vllm._C",
               "vllm._custom_ops", "vllm.distributed.device_communicators")
#: vLLM's parallel state, as the engine's own code uses it: the module itself (verl's copy
#: sets ``ps._TP_DEVICE_GROUP``), its private names, and its set-up calls. Not the clean-up
#: calls client code imports (``destroy_model_parallel``, ``destroy_distributed_environment``).
_VLLM_PARALLEL_STATE = "vllm.distributed.parallel_state"
_ENGINE_SETUP = re.compile(r"_\w*|init\w*|ensure_\w*|get_\w*group\w*|set_\w*")


def engine_import(tree: ast.Module | None, engine: tuple[str, ...] = VLLM_ENGINE) -> tuple[str, int] | None:
    """``(module, line)`` of the first module-level import (as :func:`import_blocker` reads
    them) of a module of ``engine``."""
    for statement, names in _module_level_imports(tree):
        if engine is VLLM_ENGINE and (
                _VLLM_PARALLEL_STATE in names if isinstance(statement, ast.Import)
                else names[0] == _VLLM_PARALLEL_STATE and any(_ENGINE_SETUP.fullmatch(a.name) for a in statement.names)):
            return _VLLM_PARALLEL_STATE, statement.lineno
        for name in names:
            if any(_within(name, module) for module in engine):
                return name, statement.lineno
    return None


#: Words that name a CUDA-only package in a string or an identifier (``'APEX and CUDA
#: required'``, ``has_apex``, ``'bitsandbytes requires CUDA'``, ``HAS_BNB``; TensorRT's
#: ``trt``: CosyVoice's ``torch.cuda.is_available() is False and (... load_trt ...)``
#: switches TensorRT off where CUDA is missing, held-out round 20).
CUDA_ONLY_WORDS = re.compile(
    r"(?<![a-z0-9])(apex|bitsandbytes|bnb|xformers|triton|cupy|pycuda|tensorrt|trt[_ -]?llm|trt|(?:cuda|tensorrt)_?execution_?provider|transformer[_ ]engine|"
    r"flash[_ -]?attn|nvidia[_ ]dali|dali|nvml|pynvml|onnxruntime[_ -]gpu|cupy[_ -]cuda\w*|"
    # torch.compile's inductor: its GPU code is Triton's (on Ascend only with triton-ascend,
    # docs/torch_npu_api.md); `backend="inductor" if torch.cuda.is_available() else "aot_eager"`
    r"inductor|"
    r"tile[_ ]?lang|helion|mamba[_ ]ssm|causal[_ ]conv1d|flashinfer|deep[_ ]gemm|exllama(?:v2)?|marlin|"
    # FP8 and FP4 (NVFP4, MXFP4) matmuls: neither on Atlas A2/A3 (docs/llm-stack.md, NPU928)
    r"fp8|float8|nvfp4|mxfp4|fp4|float4)(?![a-z0-9])",
    re.IGNORECASE,
)
_CAPABILITY_CALLS = ("torch.cuda.get_device_capability",)
_PROPERTIES_CALL = "torch.cuda.get_device_properties"

#: Kinds that make a gate only of a test whose own guarded side uses them: not of an
#: assertion or an early exit before the rest of a block (modded-nanogpt's scripts log
#: `torch.version.cuda` long after `assert torch.cuda.is_available()`; kept, that
#: assertion left the whole script as CUDA's).
_GUARDED_ONLY = frozenset({KIND_CUDA_VERSION})
#: Kinds whose use does not make the enclosing function or class CUDA-only.
_NOT_PROPAGATED = frozenset({KIND_DATA_PARALLEL, KIND_EXTENSION_BUILD, KIND_NAMED_PACKAGE, KIND_CUDA_VERSION,
                             KIND_CAPABILITY_CHOOSER})

#: Kind -> rules whose surviving edit on the same line means the use is being
#: migrated: NPU510 turns `nn.DataParallel(m)` into `npu_runtime.data_parallel(m)`,
#: which runs on NPU, so a test in front of it is an ordinary CUDA test again.
MIGRATED_BY: dict[str, tuple[str, ...]] = {KIND_DATA_PARALLEL: ("NPU510",)}

#: ``torch.ops`` namespaces of torch itself and of torchvision (not custom CUDA ops).
_TORCH_OP_NAMESPACES = frozenset(
    {"aten", "prims", "prim", "quantized", "quantized_decomposed", "higher_order", "profiler", "c10d",
     "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "torchvision", "torchaudio", "fbgemm", "mkldnn"}
)
_CUDA_PART = re.compile(r"(?:^|_)cuda(?:$|_)", re.IGNORECASE)
#: a method name that says it is an implementation (with ``cuda`` in it: the CUDA one)
_CUDA_PATH_METHOD = re.compile(r"forward|kernel|impl", re.IGNORECASE)
_PREDICATE = re.compile(r"_?(?:is|has|use|get|set|check|can|with|enable|disable|maybe|should)_", re.IGNORECASE)
_QUERY = re.compile(r"_(?:available|version|enabled|count|visible|devices?|home|path|capability|arch)$", re.IGNORECASE)
_TORCH_CUDA_BINDING = re.compile(r"torch\._C\._(?:cuda|nccl|cudnn|cublas|cufft)\w*")
#: torch's CUDA inter-process sharing internals, called on a storage or its class (a copy
#: of ``torch.multiprocessing.reductions`` in diffusion-pipe's utils/reduction.py, held-out
#: round 24): CUDA IPC handles, which no NPU storage has
_CUDA_IPC_METHODS = frozenset({"_share_cuda_", "_new_shared_cuda", "_release_ipc_counter_cuda"})
_DEVICE_STRING = re.compile(r"cuda(?::.*)?")
_TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
#: Decorators that define an operator with the device types it has kernels for.
_OP_DEFINITIONS = frozenset({"custom_op", "triton_op"})


@functools.cache
def _package_kinds() -> tuple[tuple[str, str], ...]:
    """``(package prefix, kind)`` of every package an NPU9xx rule reports, minus its exemptions
    (returned as ``(prefix, "")``, longest prefixes first)."""
    from npu_migrate.pipeline.registry import rules_for

    found: list[tuple[str, str]] = []
    for rule in rules_for("python").values():
        packages = getattr(rule, "packages", None)
        label = getattr(rule, "label", None)
        if not packages or not label:
            continue
        found += [(p, f"{label}, which does not run on Ascend") for p in packages]
        found += [(p, "") for p in getattr(rule, "exempt", ())]
    return tuple(sorted(found, key=lambda item: len(item[0]), reverse=True))


def _within(qualified: str, prefix: str) -> bool:
    return qualified == prefix or qualified.startswith(prefix + ".")


def classify_name(qualified: str) -> str | None:
    """What kind of CUDA-only code the qualified name (or module) ``qualified`` is,
    or None. Relative module names keep their leading dots (``._C``)."""
    if any(_within(qualified, name) for name in DATA_PARALLEL):
        return KIND_DATA_PARALLEL
    if qualified == "torch.utils.cpp_extension.CUDAExtension":
        return KIND_EXTENSION_BUILD
    if _TORCH_CUDA_BINDING.match(qualified):
        return KIND_TORCH_BINDING
    parts = [p for p in qualified.lstrip(".").split(".") if p]
    if not parts:
        return None
    if parts[0] == "torch":
        if qualified == "torch.version.cuda":
            # OLMo-core's `if torch.cuda.is_available() and torch.cuda.is_initialized(): assert
            # torch.version.cuda is not None`: the test guards a read of CUDA's version
            return KIND_CUDA_VERSION
        if len(parts) >= 4 and parts[1] == "ops" and parts[2] not in _TORCH_OP_NAMESPACES:
            return KIND_CUSTOM_OP
        if qualified in TORCH_CUDA_KERNELS or (len(parts) == 4 and parts[1:3] == ["ops", "aten"]
                                               and parts[3] in _ATEN_CUDA_ATTENTION):
            return KIND_TORCH_CUDA_KERNEL
        return None
    if any(_NCCL_COMMUNICATOR.match(p) for p in parts):
        return KIND_NCCL_COMMUNICATOR
    for prefix, kind in _package_kinds():
        if _within(qualified, prefix):
            return kind or None
    # (Megatron's functions named for CUDA, `tensor_parallel.model_parallel_cuda_manual_seed`,
    # are Python that MindSpeed runs on the NPU: not compiled code; verl's Megatron workers)
    named = parts[:-1] if parts[0] == "megatron" else parts
    if any(_compiled_part(p, last=i == len(parts) - 1) for i, p in enumerate(named)):
        return KIND_COMPILED
    if any(p.lower() in ("cuda", "gpu") for p in parts[:-1]):
        return KIND_CUDA_MODULE  # numba.cuda.jit, cv2.cuda.X, lightning's accelerators.cuda, lib.gpu.nms
    if parts[0] in KERNEL_PACKAGES:
        return KIND_KERNEL_PACKAGE
    return None


def _compiled_part(part: str, *, last: bool) -> bool:
    """``_C`` / ``amp_C``, ``gpu``, ``fused_layer_norm_cuda``; a last part (which may be
    a function) must not read like a predicate or a getter (``is_cuda_available``)."""
    if part == "_C" or (part.endswith("_C") and not part.isupper()):
        return True
    if part.lower() == "cuda":
        return False  # a module named `cuda`: see KIND_CUDA_MODULE
    if not _CUDA_PART.search(part):
        return False
    return not (last and (_PREDICATE.match(part) or _QUERY.search(part)))


@dataclass(frozen=True)
class CudaOnly:
    """One use of CUDA-only code: ``name`` as written, ``kind`` as above."""

    name: str
    kind: str
    line: int = 0


# -- the file's names ----------------------------------------------------------------

def _relative_file(path: str, level: int, module: str | None) -> str:
    """The module file (without ``.py``) a relative import names, from ``path``."""
    import os

    base = os.path.dirname(os.path.abspath(path))
    for _ in range(level - 1):
        base = os.path.dirname(base)
    return os.path.join(base, *module.split(".")) if module else base


def all_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` in ``ast.walk`` order, listed once per tree and kept on
    it: the gate index, the line index and the NPU-aware flags each walked the whole
    file (four to six walks of every file with a CUDA gate); they now share one."""
    nodes = getattr(tree, "_npu_migrate_nodes", None)
    if nodes is None:
        nodes = list(ast.walk(tree))
        tree._npu_migrate_nodes = nodes  # ast nodes take attributes; dies with the tree
    return nodes


class FileIndex:
    """The names of one file that stand for CUDA-only code (built once per file)."""

    def __init__(self, ctx: FileContext, tree: ast.Module) -> None:
        self.ctx = ctx
        self.tree = tree
        #: local name -> qualified name of every import in the file (relative ones keep
        #: their dots), read from the whole file, so elision changes nothing.
        self.bindings: dict[str, str] = {}
        self.local: dict[str, str] = {}  # local name -> kind of CUDA-only code
        #: method name -> kind, for methods of the file's classes that use CUDA-only code
        #: without testing the device (``self.cuda_kernels_forward(...)`` in Mamba layers)
        self.methods: dict[str, str] = {}
        #: attribute name -> kind, for ``self.X = <CUDA-only code>`` in a method of the file's
        #: classes (gpt-neox's ``self.norm_fn = FusedRMSNormAffineFunction``, used in ``forward``)
        self.attributes: dict[str, str] = {}
        self._call_statements: dict[str, list[tuple[ast.stmt, list[ast.stmt]]]] | None = None
        #: the file's module-level function names
        self.functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        #: id(scope) -> :meth:`tests_by_key` of that scope (scopes are nodes of ``tree``)
        self._tests: dict[int, dict[tuple[str, str], list[tuple[ast.AST, list | None]]]] = {}
        self._imports(tree)
        #: ``func`` nodes (by id) of calls that probe the CUDA compute capability, and the calls
        #: attributes set only behind kept gates (``add_gated_state``): dotted name -> kind
        self.gated: dict[str, str] = {}
        self.probe_funcs: set[int] = set()
        self.probes: list[ast.Call] = []
        self._capability_probes(tree)
        self._definitions(tree)

    # state set only behind a kept gate

    def add_gated_state(self, gates: Collection[Gate], test_of) -> bool:
        """Record the attributes (``self.gpu_config``) that code guarded by ``gates``
        assigns and no code outside a guarded span assigns to anything but None: on
        NPU they keep their unguarded default, so code that uses them is CUDA-only.
        Returns whether anything new was recorded."""
        spans = [(a, b, gate) for gate in gates for a, b in gate.guarded]
        inside: dict[str, str] = {}
        outside: set[str] = set()
        for node in all_nodes(self.tree):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                dotted = ast_dotted_name(target) if isinstance(target, ast.Attribute) else None
                if dotted is None:
                    continue
                span = next((g for a, b, g in spans if a <= node.lineno <= b), None)
                if span is not None:
                    inside.setdefault(dotted, test_of(span))
                elif not (isinstance(node.value, ast.Constant) and node.value.value is None):
                    outside.add(dotted)
        added = False
        for dotted, test in inside.items():
            if dotted not in outside and dotted not in self.gated:
                self.gated[dotted] = f"set only behind the CUDA test `{test}`, which stays a CUDA test"
                added = True
        return added

    # compute-capability probes

    def _capability_probes(self, tree: ast.Module) -> None:
        """``torch.cuda.get_device_capability()`` anywhere, and
        ``torch.cuda.get_device_properties(...)`` whose ``.major``/``.minor`` is read, on
        the call or on a name it was assigned to (a name whose ``.major``/``.minor`` is read
        anywhere in the file)."""
        # A function's walk is part of the module's walk, and every name its own walk
        # would collect is in the module's set, so one walk per question over the whole
        # tree finds the same probes in the same order as one walk per function did
        # (which walked each nested node once per enclosing function).
        nodes = all_nodes(tree)
        names = {
            node.value.id for node in nodes
            if isinstance(node, ast.Attribute) and node.attr in ("major", "minor") and isinstance(node.value, ast.Name)
        }
        for node in nodes:
            if isinstance(node, ast.Attribute) and node.attr in ("major", "minor") and isinstance(node.value, ast.Call):
                self._probe(node.value, _PROPERTIES_CALL)
            elif isinstance(node, ast.Call):
                self._probe(node, *_CAPABILITY_CALLS)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                    self._probe(node.value, _PROPERTIES_CALL)

    def _probe(self, call: ast.Call, *names: str) -> None:
        if id(call.func) in self.probe_funcs:
            return
        if self.resolve(ast_dotted_name(call.func) or "") in names:
            self.probe_funcs.add(id(call.func))
            self.probes.append(call)

    # names

    def _import_kind(self, node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str | None]:
        """The qualified name an import alias binds, and the kind of CUDA-only code it is."""
        facts = self.ctx.facts
        if isinstance(node, ast.Import):
            return alias.name, classify_name(alias.name) or (KIND_PROJECT if facts.is_cuda_only_module(alias.name) else None)
        module = node.module or ""
        if node.level:
            qualified = "." * node.level + (f"{module}." if module else "") + alias.name
            files = (_relative_file(self.ctx.path, node.level, module or None),
                     _relative_file(self.ctx.path, node.level, f"{module}.{alias.name}" if module else alias.name))
            project = any(facts.is_cuda_only_file(f) for f in files)
            return qualified, classify_name(qualified) or (KIND_PROJECT if project else None)
        qualified = f"{module}.{alias.name}"
        project = facts.is_cuda_only_module(qualified) or facts.is_cuda_only_module(module)
        return qualified, classify_name(qualified) or (KIND_PROJECT if project else None)

    def _imports(self, tree: ast.Module) -> None:
        for node in all_nodes(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                qualified, kind = self._import_kind(node, alias)
                if isinstance(node, ast.Import) and alias.asname is None:
                    root = alias.name.split(".", 1)[0]
                    self.bindings.setdefault(root, root)
                    if kind is not None and "." not in alias.name:
                        self.local[root] = kind
                    continue
                local = alias.asname or alias.name
                self.bindings.setdefault(local, qualified)
                if kind is not None:
                    self.local[local] = kind

    def _definitions(self, tree: ast.Module) -> None:
        statements = list(_module_level(tree.body))
        definitions = [n for n in statements if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        for node in definitions:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._plugin_initializer(node)
                self._global_aliases(node)
        for node in definitions:
            if any(self.resolve(ast_dotted_name(d.func if isinstance(d, ast.Call) else d) or "") in _TRITON_DECORATORS
                   for d in node.decorator_list):
                self.local[node.name] = KIND_TRITON
            elif any(_registered_for_cuda_only(d) for d in node.decorator_list):
                self.local[node.name] = KIND_CUDA_OPERATOR
        for _ in range(3):  # wrappers of wrappers
            changed = False
            for node in statements:
                changed |= self._module_assignment(node)
            for node in definitions:
                if node.name in self.local or _tests_device(node):
                    continue
                use = self.first_use([node], propagate_only=True)
                if use is not None:
                    self.local[node.name] = f"it calls {use.name}, {use.kind}"
                    changed = True
            if not changed:
                break
        for node in definitions:
            if not isinstance(node, ast.ClassDef):
                continue
            for method in node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and _CUDA_PART.search(method.name):
                    # `cuda_kernels_forward`, `forward_cuda`: the class's CUDA path by its own name
                    self.methods.setdefault(method.name, KIND_CUDA_METHOD)
                if (isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _tests_device(method, methods=True)
                        and (use := self.first_use([method], propagate_only=True)) is not None):
                    self.methods.setdefault(method.name, f"it calls {use.name}, {use.kind}")
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self._attribute_aliases(method)

    def _plugin_initializer(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A function that builds CUDA sources into a module global (StyleGAN2-ADA's
        ``torch_utils/ops``, vendored by many diffusion repositories: ``_init()`` sets ``global
        _plugin`` from ``custom_ops.get_plugin(..., sources=[... 'bias_act.cu'],
        extra_cuda_cflags=[...])``): the global and the function are CUDA-only code, so a device
        test in front of them (``x.device.type == 'cuda' and _init()``) is a gate (held-out
        round 19, Latte: rewritten, it sent NPU tensors into the plugin)."""
        globals_ = {name for node in ast.walk(function) if isinstance(node, ast.Global) for name in node.names}
        if not globals_:
            return
        lists: dict[str, ast.AST] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                lists.setdefault(node.targets[0].id, node.value)
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in globals_]
            if names and _builds_cuda(node.value, lists):
                for name in names:
                    self.local.setdefault(name, KIND_JIT_BUILD)
                self.local.setdefault(function.name, KIND_JIT_BUILD)

    def _global_aliases(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A loader that binds a module global to CUDA-only code it imports (Qwen's
        ``_import_flash_attn``: ``global apply_rotary_emb_func`` ... ``from flash_attn.layers.rotary
        import apply_rotary_emb_func as __apply_rotary_emb_func; apply_rotary_emb_func =
        __apply_rotary_emb_func``): the global is that code wherever the module calls it, so
        ``if apply_rotary_emb_func is not None and t.is_cuda:`` is a gate (MoE-LLaVA, held-out
        round 26: rewritten, it sent NPU tensors into flash-attn's rotary kernel)."""
        globals_ = {name for node in ast.walk(function) if isinstance(node, ast.Global) for name in node.names}
        if not globals_:
            return
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)):
                continue
            kind = self.local.get(node.value.id)
            if kind is None:
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in globals_:
                    self.local.setdefault(target.id, kind)
                    self.bindings.setdefault(target.id, self.bindings.get(node.value.id, node.value.id))

    def _attribute_aliases(self, method: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """``self.X = name`` where ``name`` is CUDA-only code itself (an alias, as
        :meth:`_module_assignment` takes them; not an object built with it)."""
        for node in ast.walk(method):
            if not isinstance(node, ast.Assign) or ast_dotted_name(node.value) is None:
                continue
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "self" and target.attr not in self.attributes):
                    use = self.first_use([node.value], propagate_only=True)
                    if use is not None:
                        self.attributes[target.attr] = f"it holds {use.name}, {use.kind}"

    def _module_assignment(self, node: ast.stmt) -> bool:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            return False
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name) and t.id not in self.local]
        if not names:
            return False
        value = node.value
        kind = None
        if isinstance(value, ast.Call) and self.resolve(ast_dotted_name(value.func) or "") in _CPP_LOAD and _cuda_sources(value):
            kind = KIND_JIT_BUILD
        elif ast_dotted_name(value) is not None:
            # an alias of CUDA-only code (`roi_align = _ROIAlign.apply`, `nms = _C.nms`); not an
            # object built with it (`model = ApexDDP(model)`), which is passed around as data
            use = self.first_use([value], propagate_only=True)
            kind = use.kind if use is not None else None
        if kind is None:
            return False
        for name in names:
            self.local[name] = kind
        return True

    def tests_by_key(self, scope: ast.AST) -> dict[tuple[str, str], list[tuple[ast.AST, list | None]]]:
        """The ``if`` statements (with the statement list that holds each) and conditional
        expressions of ``scope``, by what their test names (:func:`_test_keys`), each list
        in :func:`_tests_in`'s order; built once per scope. A flag's gate used to walk its
        whole scope again (2,000 ``cuda_fN = torch.cuda.is_available()`` lines: 2,000
        walks of the module)."""
        found = self._tests.get(id(scope))
        if found is None:
            found = {}
            for node, holder in _tests_in(scope):
                for key in _test_keys(node.test):
                    found.setdefault(key, []).append((node, holder))
            self._tests[id(scope)] = found
        return found

    def call_statements(self) -> dict[str, list[tuple[ast.stmt, list[ast.stmt]]]]:
        """:func:`_call_statements` of the file, built once (asked per input check)."""
        if self._call_statements is None:
            self._call_statements = _call_statements(self.tree)
        return self._call_statements

    def resolve(self, dotted: str) -> str:
        """A dotted name with its first part resolved through the imports."""
        root, _, rest = dotted.partition(".")
        bound = self.bindings.get(root)
        if bound is None:
            return dotted
        return f"{bound}.{rest}" if rest else bound

    # uses

    def kind_of(self, dotted: str) -> str | None:
        root = dotted.split(".", 1)[0]
        if "." in dotted and dotted.rsplit(".", 1)[1] in _CUDA_IPC_METHODS:
            return KIND_TORCH_BINDING
        if root == "self" and "." in dotted:
            name = dotted.split(".")[1]
            found = self.methods.get(name) or self.attributes.get(name)
            if found is None and _CUDA_PATH_METHOD.search(name) and _CUDA_PART.search(name):
                # `self.cuda_kernels_forward(...)` of a class defined elsewhere (axolotl patches
                # transformers' FalconH1Mixer): the class's CUDA path by its own name
                found = KIND_CUDA_METHOD
            return found
        if root in self.local:
            return self.local[root]
        if dotted in self.ctx.facts.capability_choosers and (root in self.bindings or root in self.functions):
            return KIND_CAPABILITY_CHOOSER
        if dotted in self.ctx.facts.nvidia_tool_functions and root in self.bindings:
            return KIND_NVIDIA_TOOL
        if root in self.bindings:
            resolved = self.resolve(dotted)
            kind = classify_name(resolved)
            if kind is None and not resolved.startswith("."):
                parts = resolved.split(".")
                if any(self.ctx.facts.is_cuda_only_module(".".join(parts[:n])) for n in range(1, len(parts))):
                    kind = KIND_PROJECT
            if kind is None and CUDA_ONLY_WORDS.search(resolved.rsplit(".", 1)[-1].replace("_", " ")):
                # a function of another module named for a CUDA-only package (open_lm's
                # `xformers_attn`, imported from its attention module): what it runs is not
                # in this file, its name says what it is; a gate in front of it holds (not
                # propagated: it does not make the functions calling it CUDA-only)
                kind = KIND_NAMED_PACKAGE
            return kind
        return None

    def first_use(self, nodes: Iterable[ast.AST], *, propagate_only: bool = False,
                  migrated: Collection[tuple[int, str]] = (), skip: Collection[str] = ()) -> CudaOnly | None:
        """The first use of CUDA-only code in ``nodes`` (ast), if any (not of the kinds in ``skip``)."""
        for node in _walk_uses(nodes):
            use = self._use(node)
            if use is None or use.kind in skip:
                continue
            if propagate_only and use.kind in _NOT_PROPAGATED:
                continue
            if any((use.line, rule) in migrated for rule in MIGRATED_BY.get(use.kind, ())):
                continue
            return use
        return None

    def _use(self, node: ast.AST) -> CudaOnly | None:
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                qualified, kind = self._import_kind(node, alias) if alias.name != "*" else ("", None)
                if kind is not None:
                    return CudaOnly(qualified, kind, line)
            return None
        dotted = ast_dotted_name(node)
        if dotted is None:
            return None
        if id(node) in self.probe_funcs:
            return CudaOnly(dotted, KIND_CAPABILITY, line)
        if self.gated:
            parts = dotted.split(".")
            for n in range(len(parts), 1, -1):
                kind = self.gated.get(".".join(parts[:n]))
                if kind is not None:
                    return CudaOnly(".".join(parts[:n]), kind, line)
        kind = self.kind_of(dotted)
        return CudaOnly(dotted, kind, line) if kind is not None else None


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level, also inside ``if``/``try``/``with`` blocks."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
            for field in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(node, field, []))
            for handler in getattr(node, "handlers", ()):
                yield from _module_level(handler.body)


def _walk_uses(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Outermost dotted names and import statements, in source order, skipping
    ``isinstance``/``issubclass``/``hasattr`` checks and nested definitions' bodies
    only when they are the nodes themselves."""
    stack = list(reversed(list(nodes)))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, (ast.Name, ast.Attribute)) and ast_dotted_name(node) is not None:
            yield node
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass", "hasattr"):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


#: Attributes that name a project's own kernel choice, not a device (``self.backend == 'cuda'``
#: picks mamba's CUDA kernels over its Triton ones).
_CHOICE_ATTRIBUTES = frozenset({"backend", "impl", "implementation", "kernel", "mode"})


def _walk_own_code(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` without decorators: ``@custom_op(..., device_types="cuda")`` says
    where the function is registered, not that its body dispatches on the device."""
    stack = [node]
    while stack:
        child = stack.pop()
        yield child
        decorators = getattr(child, "decorator_list", ())
        stack.extend(c for c in ast.iter_child_nodes(child) if not any(c is d for d in decorators))


def _registered_for_cuda_only(decorator: ast.AST) -> bool:
    """``@torch.library.custom_op(name, mutates_args=(), device_types="cuda")``: the
    operator has a kernel for CUDA and for no other device, so calling it with NPU
    tensors fails (no kernel registered for the NPU)."""
    if not isinstance(decorator, ast.Call) or (ast_dotted_name(decorator.func) or "").rsplit(".", 1)[-1] not in _OP_DEFINITIONS:
        return False
    types = next((k.value for k in decorator.keywords if k.arg == "device_types"), None)
    values = types.elts if isinstance(types, (ast.Tuple, ast.List, ast.Set)) else [types]
    return bool(values) and all(isinstance(v, ast.Constant) and isinstance(v.value, str)
                                and _DEVICE_STRING.fullmatch(v.value) for v in values)


def _tests_device(node: ast.AST, *, methods: bool = False) -> bool:
    """``node`` itself dispatches on the device (an ``is_cuda``, a ``"cuda"`` string,
    ``torch.cuda``): a wrapper with its own fallback is not CUDA-only. With ``methods``
    (a class's methods), a ``"cuda"`` compared with ``x.backend``-like attributes is the
    project's own kernel choice, not a device test."""
    choices: set[int] = set()
    if methods:
        for child in ast.walk(node):
            if isinstance(child, ast.Compare) and any(
                    isinstance(o, ast.Attribute) and o.attr in _CHOICE_ATTRIBUTES
                    for o in (child.left, *child.comparators)):
                choices.update(id(o) for o in child.comparators)
                choices.add(id(child.left))
    for child in _walk_own_code(node):
        if isinstance(child, ast.Attribute) and child.attr in ("is_cuda", "is_available"):
            return True
        if (isinstance(child, ast.Constant) and isinstance(child.value, str) and _DEVICE_STRING.fullmatch(child.value)
                and id(child) not in choices):
            return True
    return False


def file_index(ctx: FileContext) -> FileIndex | None:
    """The file's :class:`FileIndex` (None when CPython cannot parse the file)."""
    index = getattr(ctx, "_cuda_only_index", None)
    if index is None:
        tree = ctx.python_ast()
        if tree is None:
            return None
        index = FileIndex(ctx, tree)
        ctx._cuda_only_index = index
    return index


# -- gates -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Gate:
    """A CUDA test that keeps CUDA-only code away from other devices."""

    test: cst.CSTNode        # the if/elif/conditional test, flag value or returned value (cst)
    kernel: CudaOnly
    fallback: str            # what NPU runs instead, for the finding
    guarded: tuple[tuple[int, int], ...]  # original line ranges of the guarded code
    has_fallback: bool


_PASS_UP = (cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation, cst.Element, cst.Tuple, cst.List, cst.Set,
            cst.Subscript, cst.SubscriptElement, cst.Index)


def _gate_position(ctx: FileContext, node: cst.CSTNode) -> tuple[str, cst.CSTNode, cst.CSTNode, bool] | None:
    """Walk up from a CUDA test atom through the expressions that only combine
    conditions: ``(kind, owner, test, negated)`` where kind is ``if``, ``ifexp``,
    ``flag`` or ``predicate``; None where the value is not a condition."""
    negated = False
    # A string only becomes a condition through a comparison (`x.device.type == "cuda"`);
    # `device = "cuda"` is a value, not a test.
    condition = not isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
    # Only a value that is a truth value gates through a flag or a predicate: `x.is_cuda`,
    # `torch.cuda.is_available()`, a comparison; not `n = torch.cuda.device_count()`.
    boolean = _is_truth_value(node)
    current = node
    while True:
        parent = ctx.parent(current)
        if parent is None:
            return None
        if isinstance(parent, cst.If) and parent.test is current:
            return ("if", parent, current, negated) if condition else None
        if isinstance(parent, cst.Assert) and parent.test is current:
            return ("assert", parent, current, negated) if condition else None
        if isinstance(parent, cst.IfExp):
            return ("ifexp", parent, current, negated) if parent.test is current and condition else None
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is current:
            return ("flag", parent, current, negated) if boolean else None
        if isinstance(parent, cst.Return) and parent.value is current:
            function = next((a for a in ctx.ancestors(parent) if isinstance(a, cst.FunctionDef)), None)
            return ("predicate", function, current, negated) if function is not None and boolean else None
        if isinstance(parent, cst.Lambda) and parent.body is current:
            return ("predicate", parent, current, negated) if boolean else None
        testing_call = isinstance(parent, cst.Call) and _callee(parent) in _TESTING_CALLS
        if isinstance(parent, cst.Comparison) or testing_call or _is_not(parent):
            condition = boolean = True
        if _is_not(parent) or _is_negative_comparison(parent):
            negated = not negated  # `not x.is_cuda`, `x.device.type != "cuda"`
        if _is_not(parent):
            pass
        elif isinstance(parent, cst.Attribute) and parent.value is current:
            pass  # torch.cuda.get_device_properties(0).major
        elif isinstance(parent, cst.Call):
            if parent.func is not current and not testing_call:
                return None
        elif isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call) or _callee(call) not in _TESTING_CALLS:
                return None
        elif isinstance(parent, (cst.GeneratorExp, cst.ListComp)):
            if parent.elt is not current:
                return None
        elif not isinstance(parent, _PASS_UP):
            return None  # also a CompFor: `for` targets and iterables are not conditions
        current = parent


_TESTING_CALLS = frozenset({"startswith", "endswith", "bool", "all", "any"})


def _is_not(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not)


_NEGATIVE_OPERATORS = (cst.NotEqual, cst.NotIn, cst.IsNot)


def _is_negative_comparison(node: cst.CSTNode) -> bool:
    """``device.type != "cuda"``, ``dev.type not in ("cuda", "xpu")``: true where the
    device is *not* CUDA, so the test's own branch is the fallback (one operator only)."""
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1):
        return False
    target = node.comparisons[0]
    if isinstance(target.operator, _NEGATIVE_OPERATORS):
        # (`x.is_cuda is not False` says the same as the test itself)
        return not (isinstance(target.comparator, cst.Name) and target.comparator.value == "False")
    # `torch.cuda.is_available() is False` / `== False` (CosyVoice, held-out round 20)
    return isinstance(target.operator, (cst.Is, cst.Equal)) and isinstance(target.comparator, cst.Name) \
        and target.comparator.value == "False"


def _callee(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


_TRUTH_ATTRIBUTES = frozenset({"is_cuda", "is_available", "is_initialized", "is_bf16_supported", "is_current_stream_capturing"})


def _is_truth_value(node: cst.CSTNode) -> bool:
    """``x.is_cuda``, ``torch.cuda.is_available`` (called by the parent)."""
    return isinstance(node, cst.Attribute) and node.attr.value in _TRUTH_ATTRIBUTES


def _line(ctx: FileContext, node: cst.CSTNode) -> int:
    return ctx.position(node).start.line


_ASSERTION_STOPS = "the assertion stops there with its own message, as it does without CUDA"


def _span(statements: Iterable[ast.AST]) -> tuple[tuple[int, int], ...]:
    return tuple((s.lineno, getattr(s, "end_lineno", s.lineno) or s.lineno) for s in statements)


def _statement_at(tree: ast.Module, line: int, types: tuple[type, ...]) -> tuple[ast.AST | None, list[ast.stmt] | None]:
    """The ast node of one of ``types`` that starts at ``line``, and the statement list holding it."""
    for node, holder in _line_index(tree).statements.get(line, ()):
        if isinstance(node, types):
            return node, holder
    return None, None


def _expressions_at(tree: ast.AST, line: int, kind: type) -> Iterator[ast.AST]:
    for node in _line_index(tree).nodes.get(line, ()):
        if isinstance(node, kind):
            yield node


class _LineIndex:
    """Where the nodes of one ``ast`` tree start, built once per tree: the gate finders
    ask about one line per CUDA test, and a walk of the whole tree per question made a
    file with n tests cost n walks (quadratic as a file grows, ``bench/dense.py linear``).
    The lists keep the order of the walks they replace, so the first match is the same."""

    def __init__(self, tree: ast.AST) -> None:
        #: line -> (statement, list holding it), in the order of the former depth-first search
        self.statements: dict[int, list[tuple[ast.AST, list | None]]] = {}
        stack: list[tuple[ast.AST, list | None]] = [(tree, None)]
        while stack:
            node, holder = stack.pop()
            line = getattr(node, "lineno", None)
            if line is not None:
                self.statements.setdefault(line, []).append((node, holder))
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(node, field, None)
                if isinstance(block, list):
                    stack.extend((child, block) for child in block if isinstance(child, ast.AST))
        #: line -> every node starting there, in ``ast.walk`` order; the functions, in that order
        self.nodes: dict[int, list[ast.AST]] = {}
        self.functions: list[ast.AST] = []
        for node in all_nodes(tree):
            line = getattr(node, "lineno", None)
            if line is not None:
                self.nodes.setdefault(line, []).append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.append(node)


def _line_index(tree: ast.AST) -> _LineIndex:
    index = getattr(tree, "_npu_migrate_lines", None)
    if index is None:
        index = _LineIndex(tree)
        tree._npu_migrate_lines = index  # ast nodes take attributes; dies with the tree
    return index


class _GateFinder:
    def __init__(self, ctx: FileContext, index: FileIndex, migrated: Collection[tuple[int, str]]) -> None:
        self.ctx = ctx
        self.index = index
        self.migrated = migrated

    def use(self, nodes: Iterable[ast.AST], skip: Collection[str] = ()) -> CudaOnly | None:
        return self.index.first_use(nodes, migrated=self.migrated, skip=skip)

    def if_gate(self, statement: ast.If, holder: list[ast.stmt] | None, negated: bool) -> tuple | None:
        if negated:
            guarded = statement.orelse
            if not guarded and holder is not None and statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise)):
                rest = holder[holder.index(statement) + 1:]
                use = self.use(rest, skip=_GUARDED_ONLY)
                if use is not None:
                    exit_ = "raise" if isinstance(statement.body[-1], ast.Raise) else "return"
                    return use, f"the early `{exit_}` is taken instead", _span(rest), True
                if not guarded and isinstance(statement.body[-1], ast.Raise):
                    found = self.precondition_gate(statement)
                    if found is not None:
                        return found
            use = self.use(guarded)
            if use is None:
                return None
            return use, "the test is true and its own branch runs instead", _span(guarded), True
        # the test's own later conditions are guarded too: `x.is_cuda and probe()[0] >= 9`
        use = self.use([statement.test, *statement.body])
        if use is None:
            return None
        orelse = statement.orelse
        if not orelse:
            after = holder[holder.index(statement) + 1:] if holder is not None and statement in holder else []
            if after and statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise)):
                return use, "the code after this `if` runs instead", _span(statement.body), True
            return use, "the block is skipped", _span(statement.body), False
        first = orelse[0]
        if len(orelse) == 1 and isinstance(first, ast.If) and self._is_elif(first):
            return use, "the `elif` branch runs instead", _span(statement.body), True
        return use, "the `else` branch runs instead", _span(statement.body), True

    def precondition_gate(self, statement: ast.If) -> tuple | None:
        """An input check that raises for non-CUDA values (``if not t.is_cuda: raise
        TypeError(...)``) in a function called, as a statement of its own, right before
        CUDA-only code: llm-foundry's ``check_valid_inputs(query, key, value)`` at the top
        of ``flash_attn_fn``. The check is that code's precondition; one such call site is
        enough (a rewritten check would let NPU tensors through to the kernel there)."""
        function = enclosing_function(self.index.tree, statement.lineno)
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        name = function.name
        for call, holder in self.index.call_statements().get(name, ()):
            rest = holder[holder.index(call) + 1:]
            use = self.use(rest)
            if use is not None:
                return (use, f"`{name}(...)` raises there, as it does without CUDA, before the CUDA-only code "
                             f"after the call", _span(rest), True)
        return None

    def named_if_gate(self, statement: ast.If, holder: list[ast.stmt] | None, negated: bool) -> tuple | None:
        """A CUDA test that names a CUDA-only package (``if has_apex and torch.cuda.is_available():``),
        or whose early ``raise`` does (``if not torch.cuda.is_available(): raise
        RuntimeError('bitsandbytes needs CUDA')``)."""
        texts: list[ast.AST] = [statement.test]
        if not negated and statement.body and all(_picks_a_value(n) for n in statement.body):
            # `elif device.type == "cuda": providers = ["CUDAExecutionProvider", ...]`: the branch
            # only picks another system's CUDA values (onnxruntime's provider, a TensorRT engine)
            texts += [n.value for n in statement.body]
        if negated:
            # `raise RuntimeError('bitsandbytes needs CUDA')`, and the messages a disabling
            # branch prints: `warnings.warn("apex FusedAdam requested but CUDA is unavailable")`
            # and an eligibility check's early answer: `return False, "TileLang backend is CUDA-only"`
            texts += [n for n in statement.body if isinstance(n, (ast.Raise, ast.Return)) or _is_message(n)]
            # and a predicate named for one that answers no without CUDA: a copy of
            # transformers' `is_flash_attn_2_available()` (`if not torch.cuda.is_available():
            # return False`, llama-moe's vendored Mistral, held-out round 20)
            last = statement.body[-1] if statement.body else None
            function = enclosing_function(self.index.tree, statement.lineno)
            if (isinstance(last, ast.Return) and (last.value is None or _literal(last.value))
                    and isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))):
                texts.append(ast.Name(id=function.name))
        word = named_package(texts)
        if word is None:
            return None
        use = CudaOnly(word, KIND_NAMED_PACKAGE, statement.lineno)
        if negated:
            if statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise)) and holder is not None:
                rest = holder[holder.index(statement) + 1:] if statement in holder else []
                return use, "it stops there, as it does without CUDA", _span(rest or [statement]), True
            return use, "the test is true and its own branch runs instead", _span(statement.orelse or [statement]), True
        if statement.orelse:
            return use, "the other branch runs instead", _span(statement.body), True
        return use, "the block is skipped", _span(statement.body), False

    def assert_gate(self, statement: ast.Assert, holder: list[ast.stmt] | None) -> tuple | None:
        """``assert has_apex and torch.cuda.is_available(), 'APEX and CUDA required'``: the code
        after the assertion is CUDA-only, or the assertion names a CUDA-only package."""
        rest = holder[holder.index(statement) + 1:] if holder is not None and statement in holder else []
        use = self.use(rest, skip=_GUARDED_ONLY)
        if use is None:
            word = named_package([statement.test, *([statement.msg] if statement.msg is not None else [])])
            if word is None:
                return None
            use = CudaOnly(word, KIND_NAMED_PACKAGE, statement.lineno)
        # the block the assertion stops never completes on the NPU, so the code before it is
        # dead there as well: a module-level one stops the import, so the whole file is (modded-
        # nanogpt's train_gpt.py: an edit above `assert torch.cuda.is_available()` moved an
        # import-time tensor to the NPU, which only broke the CUDA run)
        tree = self.ctx.python_ast()
        if tree is not None and holder is tree.body:
            return use, _ASSERTION_STOPS, ((1, max(1, self.ctx.text.count("\n") + 1)),), True
        return use, _ASSERTION_STOPS, _span((holder if holder is not None and statement in holder else None) or [statement]), True

    def _is_elif(self, node: ast.If) -> bool:
        source = self.ctx.text.splitlines()[node.lineno - 1] if node.lineno else ""
        return source.lstrip().startswith("elif")

    def ifexp_gate(self, node: ast.IfExp, negated: bool) -> tuple | None:
        guarded, other = (node.orelse, node.body) if negated else (node.body, node.orelse)
        use = self.use([guarded])
        if use is None and (isinstance(guarded, ast.JoinedStr) or _literal(guarded)):
            # `"onnxruntime-gpu" if cuda else "onnxruntime"`: a CUDA-only package's name;
            # `["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else [...]`: its values
            word = named_package([guarded])
            use = CudaOnly(word, KIND_NAMED_PACKAGE, node.lineno) if word is not None else None
        if use is None:
            return None
        return use, f"the other value of the conditional expression, `{ast.unparse(other)}`, is used", _span([node]), True

    def via_tests(self, scope: ast.AST, key: tuple[str, str], matches) -> tuple | None:
        """The first gate of the tests in ``scope`` that mention ``key`` (:func:`_test_keys`:
        what ``matches`` accepts, looked up in the scope's index instead of walking the
        scope again for each flag)."""
        for node, holder in self.index.tests_by_key(scope).get(key, ()):
            negated = _negated_in(node.test, matches)
            found = self.if_gate(node, holder, negated) if isinstance(node, ast.If) else self.ifexp_gate(node, negated)
            if (found is None and isinstance(node, ast.If) and not negated and node.body
                    and all(_picks_a_value(n) for n in node.body)):
                # `use_cuda = args.gpu >= 0 and torch.cuda.is_available()` then `if use_cuda:
                # EP_list = ["CUDAExecutionProvider", ...]`: the flag's branch only picks another
                # system's CUDA values (wenet's ONNX recognizer, held-out round 24), as a test
                # written in the `if` itself does (named_if_gate)
                found = self.named_if_gate(node, holder, negated)
            if found is not None:
                return found
        return None


def _is_message(statement: ast.stmt) -> bool:
    """A statement that only calls something with a string (``print(...)``,
    ``warnings.warn(...)``, ``logger.warning(...)``): its strings are messages."""
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    call = statement.value
    return any(isinstance(a, (ast.Constant, ast.JoinedStr)) for a in call.args)


def _picks_a_value(statement: ast.stmt) -> bool:
    """An assignment of literals only (strings, numbers, lists and dicts of them): a choice
    of values, no work done."""
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
        return False
    return _literal(statement.value)


def _literal(node: ast.AST) -> bool:
    """Strings, numbers, and lists, tuples, sets and dicts of them."""
    return all(isinstance(n, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.Load)) for n in ast.walk(node))


def named_package(nodes: Iterable[ast.AST]) -> str | None:
    """The first CUDA-only package named (:data:`CUDA_ONLY_WORDS`) by an identifier or a
    string in ``nodes``: ``has_apex``, ``'bitsandbytes requires CUDA'``."""
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            match = CUDA_ONLY_WORDS.search(text.replace("_", " ") if not isinstance(node, ast.Constant) else text)
            if match is not None:
                return match.group(1)
    return None


def _tests_in(scope: ast.AST) -> Iterator[tuple[ast.AST, list | None]]:
    """Every ``if`` statement (with the statement list that holds it, None when it is not
    in one) and conditional expression in ``scope``, nested scopes included."""
    stack: list[tuple[ast.AST, list | None]] = [(scope, None)]
    while stack:
        node, holder = stack.pop()
        if isinstance(node, (ast.If, ast.IfExp)):
            yield node, holder
        for _field, value in ast.iter_fields(node):
            if isinstance(value, list):
                stack.extend((child, value) for child in value if isinstance(child, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append((value, None))


def _test_keys(test: ast.AST) -> set[tuple[str, str]]:
    """What a test mentions, as the gate finders ask for it: ``("name", id)`` for a
    name, ``("attr", "a.b.c")`` for an attribute chain on a name, ``("call", f)`` for a
    call of ``f(...)`` or ``x.f(...)``."""
    keys: set[tuple[str, str]] = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Name):
            keys.add(("name", node.id))
        elif isinstance(node, ast.Attribute):
            dotted = ast_dotted_name(node)
            if dotted is not None:
                keys.add(("attr", dotted))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                keys.add(("call", node.func.id))
            elif isinstance(node.func, ast.Attribute):
                keys.add(("call", node.func.attr))
    return keys


def _negated_in(test: ast.AST, matches) -> bool:
    """Whether the first matching name sits under an odd number of ``not``."""
    def walk(node: ast.AST, negated: bool) -> bool | None:
        if matches(node):
            return negated
        false = isinstance(node, ast.Compare) and len(node.comparators) == 1 and (
            isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is False)
        flip = (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)) or (
            isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.NotEq, ast.NotIn, ast.IsNot)) != (false and not isinstance(node.ops[0], ast.NotIn)))
        for child in ast.iter_child_nodes(node):
            found = walk(child, negated != flip)
            if found is not None:
                return found
        return None

    return bool(walk(test, False))


def _call_statements(tree: ast.Module) -> dict[str, list[tuple[ast.stmt, list[ast.stmt]]]]:
    """Statements that only call a function or method (``name(...)``, ``self.name(...)``),
    with the statement list that holds each, by the name called."""
    found: dict[str, list[tuple[ast.stmt, list[ast.stmt]]]] = {}
    for node in all_nodes(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            for statement in statements:
                if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
                    continue
                func = statement.value.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name is not None:
                    found.setdefault(name, []).append((statement, statements))
    return found


def enclosing_function(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function of ``tree`` around ``line`` (the module outside functions)."""
    best: ast.AST = tree
    for node in _line_index(tree).functions:
        inside = node.lineno <= line <= (node.end_lineno or node.lineno)
        if inside and (best is tree or node.lineno >= best.lineno):
            best = node
    return best


#: Kinds of CUDA-only code that a ``__main__`` block imports to test or time it
_KERNEL_KINDS = frozenset({KIND_KERNEL_PACKAGE, KIND_TRITON, KIND_COMPILED, KIND_PROJECT, KIND_CUDA_MODULE,
                           KIND_JIT_BUILD, KIND_TORCH_CUDA_KERNEL})


def enclosing_functions(tree: ast.Module, line: int) -> list[ast.AST]:
    """The functions of ``tree`` around ``line``, innermost first."""
    found = [node for node in _line_index(tree).functions
             if node.lineno <= line <= (node.end_lineno or node.lineno)]
    return sorted(found, key=lambda node: node.lineno, reverse=True)


def main_block(tree: ast.Module, line: int) -> ast.If | None:
    """The module-level ``if __name__ == "__main__":`` block holding ``line``."""
    for statement in _main_blocks(tree):
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            return statement
    return None


def _main_blocks(tree: ast.Module) -> list[ast.If]:
    """The module-level ``if __name__ == "__main__":`` blocks, found once per tree: asked
    for each edit, the walk over every module-level statement made 16,000 device lines
    take 97 s."""
    blocks = getattr(tree, "_npu_migrate_main_blocks", None)
    if blocks is None:
        blocks = [statement for statement in tree.body
                  if isinstance(statement, ast.If) and isinstance(statement.test, ast.Compare)
                  and "__main__" in ast.unparse(statement.test) and "__name__" in ast.unparse(statement.test)]
        tree._npu_migrate_main_blocks = blocks  # ast nodes take attributes; dies with the tree
    return blocks


def kernel_import(index: FileIndex, block: ast.AST) -> CudaOnly | None:
    """The first import in ``block`` of a package of CUDA kernels, Triton code or a compiled
    CUDA extension (``from causal_conv1d import causal_conv1d_fn``)."""
    for node in _walk_own_code(block):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            use = index._use(node)
            if use is not None and (use.kind in _KERNEL_KINDS or use.kind.endswith("which does not run on Ascend")):
                return use
    return None


#: Kinds a test that calls them on every run cannot pass without CUDA: the kernel kinds and
#: a function named for a CUDA-only package (open_lm's ``xformers_attn``)
_TESTED_KINDS = _KERNEL_KINDS | {KIND_NAMED_PACKAGE}
#: Statements whose body runs whenever the statement itself runs
_ALWAYS_RUN_BODY = (ast.With, ast.AsyncWith)
#: Statements and expressions whose parts may not run (or run later): not walked
_MAY_NOT_RUN = (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.Match, ast.FunctionDef,
                ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.IfExp, ast.BoolOp, ast.ListComp,
                ast.SetComp, ast.DictComp, ast.GeneratorExp)
if hasattr(ast, "TryStar"):
    _MAY_NOT_RUN += (ast.TryStar,)


#: NVIDIA's management library: a function that calls it on every run manages NVIDIA GPUs
_NVML_MODULES = ("pynvml", "nvidia_smi", "pynvml_utils")


def _is_nvml(index: FileIndex, use: CudaOnly) -> bool:
    return any(_within(index.resolve(use.name), module) for module in _NVML_MODULES)


def unconditional_kernel_call(index: FileIndex, function: ast.AST, *, nvml_only: bool = False) -> CudaOnly | None:
    """The first CUDA-only kernel a test function calls on every run (in its own statements
    or a ``with`` block, not under an ``if``, ``try``, loop or short-circuit): open_lm's
    ``test_attention_masking_xformers`` moves its tensors with ``.cuda()`` and hands them to
    ``xformers_attn``. Such a test fails without CUDA whatever its device code says, so
    rewriting that code serves nothing. ``nvml_only``: the first call into NVML instead,
    in any function (prime-rl's ``bind_process_to_gpu_numa_node`` hands
    ``torch.cuda.current_device()`` to ``pynvml``): that function manages NVIDIA GPUs.
    Only NVML: a training function that calls flash-attn is ported by replacing that call,
    and its device code is migrated for the port."""
    def pick(call: ast.Call) -> CudaOnly | None:
        use = index._use(call.func)
        if use is not None and (_is_nvml(index, use) if nvml_only else (
                use.kind in _TESTED_KINDS and not _named_like_cuda_only(index, use))):
            return use
        return None

    return call_on_every_run(list(getattr(function, "body", [])), pick)


def call_on_every_run(statements: list[ast.stmt], pick, *, both_branches: bool = False,
                       kinds: tuple[type, ...] = (ast.Call,)):
    """The first ``pick(call)`` that is not None, in source order, among the calls that
    ``statements`` make whenever they run: in the statements themselves and ``with`` blocks,
    not under a ``try``, loop, short-circuit or nested definition; under an ``if`` only with
    ``both_branches`` and when its ``else`` has one too. ``kinds``: the nodes offered to
    ``pick`` (calls; imports and attribute reads for :mod:`npu_migrate.python.cannot_run`)."""
    for statement in statements:
        if isinstance(statement, ast.If):
            if both_branches and statement.orelse:
                first = call_on_every_run(statement.body, pick, both_branches=True, kinds=kinds)
                if first is not None and call_on_every_run(statement.orelse, pick, both_branches=True,
                                                            kinds=kinds) is not None:
                    return first
            continue
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            # the loop's body may not run, its iterable (or first test) does: verl's
            # `for key, val in self.parallel_layer.named_parameters():`
            parts: list[ast.AST] = [statement.iter if isinstance(statement, (ast.For, ast.AsyncFor)) else statement.test]
        elif isinstance(statement, _MAY_NOT_RUN):
            continue
        else:
            parts = list(statement.items) if isinstance(statement, _ALWAYS_RUN_BODY) else [statement]
        while parts:
            node = parts.pop(0)
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                parts.insert(0, node.generators[0].iter)  # evaluated at once, whatever it yields
                continue
            if isinstance(node, _MAY_NOT_RUN):
                continue
            if isinstance(node, kinds) and (found := pick(node)) is not None:
                return found
            parts[0:0] = list(ast.iter_child_nodes(node))
        if isinstance(statement, _ALWAYS_RUN_BODY):
            found = call_on_every_run(statement.body, pick, both_branches=both_branches, kinds=kinds)
            if found is not None:
                return found
    return None

#: the project's own kernels: code written for CUDA that a port replaces whole, with the
#: function that prepares its tensors (not a package of kernels such as flash-attn, whose
#: call a port swaps for an NPU op inside a function whose device code is migrated)
_OWN_KERNEL_KINDS = (KIND_JIT_BUILD, KIND_COMPILED, KIND_TRITON, KIND_PROJECT, KIND_CUSTOM_OP, KIND_CUDA_OPERATOR)


def always_calls_own_kernel(index: FileIndex, function: ast.AST) -> CudaOnly | None:
    """The first of the project's own CUDA kernels (:data:`_OWN_KERNEL_KINDS`, or a function or
    class of the file that wraps one) that ``function`` calls on every run: in its own
    statements, a ``with`` block, or both sides of an ``if``/``else``. RWKV's ``WKV.forward``
    allocates ``y = torch.empty(..., device='cuda')`` for ``wkv_cuda.forward(..., y)``, a
    JIT-built extension; its device code exists for that kernel (held-out round 19: rewritten,
    it sent NPU tensors into it). A function that tests the device (``x.is_cuda``,
    ``torch.cuda.is_available()``, a comparison with ``"cuda"``) has a path of its own
    for other devices, and is not one; its device values (``device="cuda"``) are no test."""
    for child in _walk_own_code(function):
        if isinstance(child, ast.Attribute) and child.attr in ("is_cuda", "is_available"):
            return None
        if isinstance(child, ast.Compare) and any(
                isinstance(c, ast.Constant) and isinstance(c.value, str) and _DEVICE_STRING.fullmatch(c.value)
                for c in ast.walk(child)):
            return None

    def pick(call: ast.Call) -> CudaOnly | None:
        use = index._use(call.func)
        if (use is not None and any(kind in use.kind for kind in _OWN_KERNEL_KINDS)
                and not _named_like_cuda_only(index, use)
                and not (use.kind.startswith("it calls") and KIND_COMPILED in use.kind)):
            # (a wrapper of a `*_cuda` name may be the project's own torch code:
            # MiniGPT-4's `move_to_cuda`, called by its prefetcher's `preload`)
            return use
        return applied_function(call)

    def applied_function(call: ast.Call) -> CudaOnly | None:
        """``WKV.apply(...)`` of an autograd Function of the file whose ``forward`` runs the kernel."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "apply" and isinstance(func.value, ast.Name)):
            return None
        for statement in _module_level(index.tree.body):
            if isinstance(statement, ast.ClassDef) and statement.name == func.value.id and statement is not function:
                for method in statement.body:
                    if isinstance(method, ast.FunctionDef) and method.name == "forward" and method is not function:
                        inner = always_calls_own_kernel(index, method)
                        if inner is not None:
                            return CudaOnly(f"{statement.name}.apply", f"it runs {inner.name}, {inner.kind}", inner.line)
        return None

    return call_on_every_run(list(getattr(function, "body", [])), pick, both_branches=True)


def _named_like_cuda_only(index: FileIndex, use: CudaOnly) -> bool:
    """A function called ``*_cuda`` is only named like a compiled extension: sd-scripts'
    ``swap_weight_devices_cuda`` is the project's own torch code, which the tool migrates,
    so a test that calls it is no proof of a CUDA-only kernel."""
    if use.kind != KIND_COMPILED:
        return False
    parts = index.resolve(use.name).lstrip(".").split(".")
    return not any(_compiled_part(p, last=False) for p in parts[:-1])


def nccl_communicator(index: FileIndex, function: ast.AST) -> CudaOnly | None:
    """The first use in ``function``'s own code of another library's NCCL communicator
    (:data:`KIND_NCCL_COMMUNICATOR`): an import or a call of one, or a name or attribute
    that holds one (``self._nccl_group``, ``pynccl_comm``)."""
    for node in _walk_own_code(function):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            # read, not set: `self._nccl_group = None` in `__init__` hands nothing over
            text = node.id if isinstance(node, ast.Name) else node.attr
            if _NCCL_COMMUNICATOR.match(text) and not index.resolve(ast_dotted_name(node) or "").startswith("torch."):
                return CudaOnly(ast_dotted_name(node) or text, KIND_NCCL_COMMUNICATOR, getattr(node, "lineno", 0))
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Name, ast.Attribute)):
            use = index._use(node)
            if use is not None and use.kind == KIND_NCCL_COMMUNICATOR:
                return use
    return None


def kernel_gate(ctx: FileContext, node: cst.CSTNode, migrated: Collection[tuple[int, str]] = ()) -> Gate | None:
    """The gate ``node`` (a CUDA test: ``x.is_cuda``, a ``"cuda"`` literal compared with
    a device, ``torch.cuda.is_available``) belongs to, if it keeps CUDA-only code
    from other devices. ``migrated``: ``(line, rule)`` of surviving edits, see
    :data:`MIGRATED_BY`."""
    position = _gate_position(ctx, node)
    if position is None:
        # `pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 8, ...)`:
        # not a statement's test, but the CUDA test still short-circuits the probe after it
        index = file_index(ctx)
        found = _guarded_in_condition(ctx, _GateFinder(ctx, index, migrated), node) if index is not None else None
        if found is None:
            return None
        use, fallback, guarded, has_fallback = found
        return Gate(_condition_of(ctx, node), use, fallback, guarded, has_fallback)
    kind, owner, test, negated = position
    index = file_index(ctx)
    if index is None:
        return None
    finder = _GateFinder(ctx, index, migrated)
    tree = index.tree
    found = None
    if kind == "if":
        statement, holder = _statement_at(tree, _line(ctx, owner), (ast.If,))
        if isinstance(statement, ast.If):
            found = finder.if_gate(statement, holder, negated) or finder.named_if_gate(statement, holder, negated)
    elif kind == "assert":
        statement, holder = _statement_at(tree, _line(ctx, owner), (ast.Assert,))
        if isinstance(statement, ast.Assert) and not negated:
            found = finder.assert_gate(statement, holder)
    elif kind == "ifexp":
        for expression in _expressions_at(tree, _line(ctx, owner), ast.IfExp):
            found = finder.ifexp_gate(expression, negated)
            if found is not None:
                break
    elif kind == "flag":
        element = _tuple_element(ctx, owner, node)
        if element is not None:
            test = element
        # (first: the import decides the flag whatever code its tests open)
        found = _flag_after_import(ctx, finder, owner) if element is None else None
        if found is None:
            found = _flag_gate(ctx, finder, owner, element)
        if found is None:
            found = _named_flag(ctx, owner, element)
    elif kind == "predicate":
        found = _predicate_gate(ctx, finder, owner)
    if found is None and kind in ("flag", "ifexp", "assert", "predicate"):
        found = _guarded_in_condition(ctx, finder, node)
    if found is None and kind in ("flag", "predicate"):
        found = _named_condition(ctx, node, owner)
    if found is None:
        return None
    use, fallback, guarded, has_fallback = found
    return Gate(test, use, fallback, guarded, has_fallback)


def _condition_of(ctx: FileContext, atom: cst.CSTNode) -> cst.CSTNode:
    """The operand of the boolean operation that holds ``atom`` (``not torch.cuda.is_available()``)."""
    current = atom
    parent = ctx.parent(current)
    while parent is not None and not isinstance(parent, cst.BooleanOperation):
        current, parent = parent, ctx.parent(parent)
    return current


def _guarded_in_condition(ctx: FileContext, finder: _GateFinder, atom: cst.CSTNode) -> tuple | None:
    """``x.is_cuda and torch.cuda.get_device_capability()[0] >= 8``: the CUDA test
    short-circuits the CUDA-only code in the conditions after it (``and``); so does a
    negated one in an ``or`` (``not torch.cuda.is_available() or probe()[0] < 8``)."""
    operation = ctx.parent(atom)
    negated = False
    while operation is not None and not isinstance(operation, cst.BooleanOperation):
        if not isinstance(operation, (cst.Call, cst.Attribute, cst.UnaryOperation, cst.Comparison,
                                      cst.ComparisonTarget, cst.Arg)):
            return None
        negated = negated != _is_not(operation)
        operation = ctx.parent(operation)
    if operation is None:
        return None
    wanted = ast.Or if negated else ast.And
    if not isinstance(operation.operator, cst.Or if negated else cst.And):
        return None
    line = _line(ctx, operation)
    for expression in _expressions_at(finder.index.tree, line, ast.BoolOp):
        if isinstance(expression.op, wanted):
            use = finder.use(expression.values[1:])  # the file's own nodes: probes are known by identity
            if use is not None:
                return use, "the conditions after it are not evaluated", ((line, line),), True
    return None


def _named_condition(ctx: FileContext, atom: cst.CSTNode, owner: cst.CSTNode) -> tuple | None:
    """``_triton_found and torch.cuda.is_available()`` (or ``or``) assigned or returned, or returned by
    a predicate named after a package (``def use_xformers(): return want and
    torch.cuda.is_available()``): the value says whether that CUDA-only package is used,
    so on NPU it must stay false."""
    operation = ctx.parent(atom)
    while operation is not None and not isinstance(operation, (cst.BooleanOperation, cst.Assign, cst.AnnAssign, cst.Return)):
        operation = ctx.parent(operation)
    texts: list[str] = []
    while isinstance(operation, cst.BooleanOperation):  # `and` or `or`: the value is that package's switch
        texts += [ctx.module.code_for_node(operation)]
        operation = ctx.parent(operation)
    if isinstance(owner, cst.FunctionDef):
        texts.append(owner.name.value)
    for text in texts:
        names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)
        for name in names:
            word = CUDA_ONLY_WORDS.search(name.replace("_", " "))
            if word is not None:
                line = _line(ctx, atom)
                use = CudaOnly(word.group(1).replace(" ", "_"), KIND_NAMED_PACKAGE, line)
                return use, f"the value stays false (`{name}` names {use.name})", ((line, line),), True
    return None


def _tuple_element(ctx: FileContext, assign: cst.CSTNode, node: cst.CSTNode) -> cst.CSTNode | None:
    """The element of an assigned tuple display that holds ``node`` (None: not a tuple)."""
    value = getattr(assign, "value", None)
    if not isinstance(value, cst.Tuple):
        return None
    current = node
    while current is not None:
        parent = ctx.parent(current)
        if isinstance(parent, cst.Element) and ctx.parent(parent) is value:
            return current
        current = parent
    return None


def _unpacked_target(ctx: FileContext, assign: cst.CSTNode, test: cst.CSTNode) -> cst.CSTNode | None:
    """``a, flag, d = *shape, x.is_cuda, x.device``: the target that receives ``test``,
    an element of the value tuple (counted from the end after a starred element)."""
    value = assign.value if isinstance(assign, (cst.Assign, cst.AnnAssign)) else None
    if not isinstance(value, cst.Tuple) or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    elements = list(value.elements)
    index = next((i for i, e in enumerate(elements) if e.value is test), None)
    names = list(target.elements)
    if index is None or any(isinstance(e, cst.StarredElement) for e in names):
        return None
    starred = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
    if any(i > index for i in starred):
        return None
    if starred:
        position = len(names) - (len(elements) - index)
    else:
        position = index if len(names) == len(elements) else -1
    return names[position].value if 0 <= position < len(names) else None


def _named_flag(ctx: FileContext, assign: cst.CSTNode, element: cst.CSTNode | None) -> tuple | None:
    """``use_apex = has_apex and torch.cuda.is_available()``: a flag named after a
    CUDA-only package (``use_apex``, ``HAS_BNB``, ``xformers_ok``) switches that package on."""
    targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
    if element is not None:
        unpacked = _unpacked_target(ctx, assign, element)
        targets = [unpacked] if unpacked is not None else []
    for target in targets:
        if not isinstance(target, (cst.Name, cst.Attribute)):
            continue
        name = target.value if isinstance(target, cst.Name) else target.attr.value
        word = CUDA_ONLY_WORDS.search(name.replace("_", " "))
        if word is not None:
            use = CudaOnly(word.group(1).replace(" ", "_"), KIND_NAMED_PACKAGE, _line(ctx, assign))
            return use, f"`{name}` is false and that package stays off", ((_line(ctx, assign), _line(ctx, assign)),), True
    return None


def _flag_after_import(ctx: FileContext, finder: _GateFinder, assign: cst.CSTNode) -> tuple | None:
    """``try: import fused_layer_norm_cuda / _fused_available = torch.cuda.is_available() /
    except ImportError: _fused_available = False``: a flag set in a ``try`` body right after
    that body imports CUDA-only code says whether that code can run (Fast-LLM's flash-attn,
    apex, causal_conv1d, fla and mamba flags, held-out round 25). On Ascend the import
    fails and the flag is false; rewritten, it let NPU tensors into those kernels wherever
    the package imports."""
    statement, holder = _statement_at(finder.index.tree, _line(ctx, assign), (ast.Assign, ast.AnnAssign))
    if statement is None or holder is None or statement not in holder:
        return None
    if not any(isinstance(node, ast.Try) and node.body is holder for node in all_nodes(finder.index.tree)):
        return None
    imports = [s for s in holder[:holder.index(statement)] if isinstance(s, (ast.Import, ast.ImportFrom))]
    use = finder.use(imports) if imports else None
    if use is None:
        return None
    return use, "the `try` above imports it, so on Ascend the `except` branch sets the flag", _span([statement]), True


def _flag_gate(ctx: FileContext, finder: _GateFinder, assign: cst.CSTNode, test: cst.CSTNode | None = None) -> tuple | None:
    targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
    unpacked = _unpacked_target(ctx, assign, test) if test is not None else None
    if unpacked is not None:
        targets = [unpacked]
    line = _line(ctx, assign)
    for target in targets:
        text = ctx.module.code_for_node(target)
        if isinstance(target, cst.Name):
            scope = enclosing_function(finder.index.tree, line)
            found = finder.via_tests(scope, ("name", text), lambda n, t=text: isinstance(n, ast.Name) and n.id == t)
        elif isinstance(target, cst.Attribute):
            found = finder.via_tests(finder.index.tree, ("attr", text),
                                     lambda n, t=text: isinstance(n, ast.Attribute) and ast_dotted_name(n) == t)
        else:
            continue
        if found is not None:
            return found
    return None


def _predicate_gate(ctx: FileContext, finder: _GateFinder, function: cst.CSTNode) -> tuple | None:
    tree = finder.index.tree
    if isinstance(function, cst.Lambda):
        arg = ctx.parent(function)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(call, cst.Call):
            return None
        line = _line(ctx, call)
        for expression in _expressions_at(tree, line, ast.Call):
            found = _registered_with(finder, expression, lambda n: isinstance(n, ast.Lambda))
            if found is not None:
                return found
        return None
    name = function.name.value

    def names_it(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)

    found = finder.via_tests(tree, ("call", name), lambda n: isinstance(n, ast.Call) and names_it(n.func))
    if found is not None:
        return found
    for call in all_nodes(tree):
        if isinstance(call, ast.Call):
            found = _registered_with(finder, call, names_it)
            if found is not None:
                return found
    return None


def _registered_with(finder: _GateFinder, call: ast.Call, is_predicate) -> tuple | None:
    """``register(checker=predicate, impl=kernel)``: the predicate decides whether the
    CUDA-only implementation passed next to it runs."""
    values = [*call.args, *(k.value for k in call.keywords)]
    if not any(is_predicate(v) for v in values):
        return None
    use = finder.use([v for v in values if not is_predicate(v)])
    if use is None:
        return None
    callee = ast_dotted_name(call.func) or "the call"
    return use, f"`{callee}(...)` does not use it", _span([call]), True


# the regions a kept flag gate leaves CUDA-only


def _false_makes(test: ast.AST, is_flag, value: bool) -> bool:
    """Whether ``test`` is ``value`` whenever the flag is false (``flag``, ``flag and
    x``, ``not flag``, ``not flag or x``); anything it cannot follow counts as no."""
    if is_flag(test):
        return value is False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _false_makes(test.operand, is_flag, not value)
    # `a and b` is false if one operand is; `a or b` is true if one operand is
    if isinstance(test, ast.BoolOp) and (isinstance(test.op, ast.And) and value is False
                                         or isinstance(test.op, ast.Or) and value is True):
        return any(_false_makes(v, is_flag, value) for v in test.values)
    return False


def _single_flag(ctx: FileContext, tree: ast.Module, test: cst.CSTNode) -> tuple[ast.AST, tuple[str, str], object] | None:
    """The flag a kept gate's test is assigned to (``self.cuda_available = device.type ==
    "cuda"``, or the test as an operand of an ``and``), when the file assigns it nowhere
    else: the scope its tests are read in, their key, and the matcher of its uses."""
    value, owner = test, ctx.parent(test)
    while isinstance(owner, cst.BooleanOperation) and isinstance(owner.operator, cst.And):
        value, owner = owner, ctx.parent(owner)
    if not isinstance(owner, (cst.Assign, cst.AnnAssign)) or owner.value is not value:
        return None
    targets = [t.target for t in owner.targets] if isinstance(owner, cst.Assign) else [owner.target]
    if len(targets) != 1 or not isinstance(targets[0], (cst.Name, cst.Attribute)):
        return None
    text = ctx.module.code_for_node(targets[0])
    line = _line(ctx, owner)
    if isinstance(targets[0], cst.Name):
        scope = enclosing_function(tree, line)
        key, is_flag = ("name", text), (lambda n, t=text: isinstance(n, ast.Name) and n.id == t)
    else:
        scope = tree
        key, is_flag = ("attr", text), (lambda n, t=text: isinstance(n, ast.Attribute) and ast_dotted_name(n) == t)
    stores = 0
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets_ = node.targets if isinstance(node, ast.Assign) else [node.target]
            stores += sum(1 for t in targets_ for n in ast.walk(t) if is_flag(n))
    return (scope, key, is_flag) if stores == 1 else None


def regions_behind_flags(ctx: FileContext, index: FileIndex, gates: Collection[Gate]) -> list[tuple[int, int]]:
    """Line ranges that run only where a kept gate's flag is true, so never on the NPU:
    every branch the flag opens (``if self.cuda_available:``, ``x if self.cuda_available
    else None``), not only the one that made the gate (musubi-tuner's offloader:
    ``self.cuda_available = device.type == "cuda"`` kept in front of
    ``swap_weight_devices_cuda``, whose streams and events had become ``torch.npu``'s;
    :func:`functions_only_within` adds that method)."""
    tree = index.tree
    spans: list[tuple[int, int]] = []
    for gate in gates:
        flag = _single_flag(ctx, tree, gate.test)
        if flag is None:
            continue
        scope, key, is_flag = flag
        for node, _holder in index.tests_by_key(scope).get(key, ()):
            if _false_makes(node.test, is_flag, False):
                guarded = node.body if isinstance(node, ast.If) else [node.body]
            elif _false_makes(node.test, is_flag, True):
                guarded = node.orelse if isinstance(node, ast.If) else [node.orelse]
            else:
                continue
            spans += [(n.lineno, n.end_lineno or n.lineno) for n in guarded]
    return spans


def functions_only_within(tree: ast.Module, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The lines of the file's functions named for the CUDA path or private whose every
    mention in the file lies in ``spans`` (code kept for CUDA) or in such a function:
    reached only from there, they never run on the NPU either."""
    if not spans:
        return []
    spans = list(spans)
    found: list[tuple[int, int]] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and (n.name.startswith("_") and not n.name.startswith("__") or _CUDA_PART.search(n.name))]
    mentions: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name is not None:
            mentions.setdefault(name, []).append(node.lineno)
    done: set[int] = set()
    changed = True
    while changed:
        changed = False
        for function in functions:
            if id(function) in done:
                continue
            lines = mentions.get(function.name, [])
            if lines and all(any(a <= n <= b for a, b in spans) for n in lines):
                spans.append((function.lineno, function.end_lineno or function.lineno))
                found.append(spans[-1])
                done.add(id(function))
                changed = True
    return found


#: TensorRT's execution-context calls: ``engine.create_execution_context()``,
#: ``context.execute_async_v3(stream)`` and their older forms; distinctive names, each
#: hands the tensors' device pointers and a CUDA stream to TensorRT
TENSORRT_EXECUTION = frozenset({"create_execution_context", "execute_async_v3", "execute_async_v2", "execute_v2"})


#: TensorRT's Python packages: the runtime, NVIDIA's torch converter, TensorRT-LLM
TENSORRT_PACKAGES = frozenset({"tensorrt", "torch2trt", "tensorrt_llm", "torch_tensorrt"})


def _imported_root(node: ast.Import | ast.ImportFrom) -> str | None:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] if not node.level else None
    return next((alias.name.split(".")[0] for alias in node.names if alias.name.split(".")[0] in TENSORRT_PACKAGES),
                None)


def tensorrt_blocks(tree: ast.Module) -> list[tuple[int, int, int, str]]:
    """``(first, last, line, call)``: the innermost function, or ``if``/``else`` branch of
    one, that runs a TensorRT execution context (CosyVoice's ``forward_estimator``: its
    ``else`` branch sets tensor addresses and calls ``execute_async_v3`` on
    ``torch.cuda.current_stream()``; its ``TrtContextWrapper.__init__`` makes a CUDA
    stream per context). The streams and tensors there are TensorRT's, which has no
    Ascend build."""
    calls = [(node.lineno, node.func.attr) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr in TENSORRT_EXECUTION]
    # and a block that imports TensorRT's Python packages itself (YOLOX's `if trt_file is not
    # None: from torch2trt import TRTModule`, held-out round 24): module-level imports are
    # the whole module's (cuda_backend.unimportable_module)
    module_level = {id(s) for s in tree.body}
    calls += [(node.lineno, root) for node in ast.walk(tree)
              if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in module_level
              and (root := _imported_root(node)) in TENSORRT_PACKAGES]
    if not calls:
        return []
    suites: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            suites.append((node.lineno, node.end_lineno or node.lineno))
        elif isinstance(node, ast.If):
            for suite in (node.body, node.orelse):
                if suite:
                    suites.append((suite[0].lineno, suite[-1].end_lineno or suite[-1].lineno))
    found = []
    for line, name in calls:
        around = [(a, b) for a, b in suites if a <= line <= b]
        if around:
            first, last = min(around, key=lambda s: s[1] - s[0])
            found.append((first, last, line, name))
    return found
