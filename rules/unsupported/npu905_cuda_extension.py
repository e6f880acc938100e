"""NPU905: CUDA C++ extensions (CUDAExtension, load/load_inline with CUDA sources, .cu files)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule

CPP_EXTENSION = "torch.utils.cpp_extension"
_CUDA_SUFFIXES = (".cu", ".cuh")
EXTENSION_SUGGESTION = (
    "CUDA kernels do not build for Ascend: rewrite them as Ascend C custom operators, or with torch ops; "
    "the C++ glue can stay and be built with NpuExtension from torch_npu.utils.cpp_extension "
    "(CppExtension when it no longer needs the NPU headers), still with BuildExtension"
)
LOAD_SUGGESTION = (
    "drop the CUDA sources (and with_cuda / cuda_sources) and implement those kernels with torch ops or as Ascend C "
    "custom operators; load() then builds only the C++ part"
)


def _is_cuda_source(value: str | None) -> bool:
    """A file name or glob ending in .cu/.cuh; a bare ".cu" is an extension test, not a file."""
    if value is None:
        return False
    value = value.strip().lower()
    return value.endswith(_CUDA_SUFFIXES) and value not in _CUDA_SUFFIXES


def _names_cuda_source(node: cst.CSTNode | None) -> bool:
    """A string literal, or a list/tuple literal of them, naming a .cu/.cuh file."""
    if node is None:
        return False
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return any(_names_cuda_source(e.value) for e in node.elements)
    return _is_cuda_source(string_value(node))


class CudaExtension(Rule):
    id = "NPU905"
    impact = "blocking"
    name = "cuda-extension"
    summary = "Report CUDA C++ extensions: CUDAExtension, cpp_extension.load/load_inline with CUDA sources, .cu files"
    fixable = False
    triggers = ("CUDAExtension", "cpp_extension", "CUDA_HOME", "cu", "cuh")
    rationale = """
Custom CUDA kernels (`.cu` files built with `torch.utils.cpp_extension.CUDAExtension`,
or JIT-built with `load(..., sources=[... '.cu'])` / `load_inline(cuda_sources=...)`)
need nvcc and a CUDA device; nothing can translate them for Ascend automatically.
The kernels must be rewritten, as Ascend C custom operators or with torch ops; the
C++ binding code can stay and be built with `NpuExtension` from
`torch_npu.utils.cpp_extension` (it adds torch_npu's include and library paths).
Reported: every use of `CUDAExtension` (not only calls: `Ext = CUDAExtension if ... else
CppExtension` counts), `load`/`load_inline` calls with CUDA sources, `with_cuda=True` or
`cuda_sources=`, `cpp_extension.CUDA_HOME`, and other string literals naming `.cu`/`.cuh` files.
Plain `CppExtension` and `BuildExtension` are left alone: they work with torch_npu.
"""
    examples = (
        Example(
            "from torch.utils.cpp_extension import CUDAExtension\n"
            "ext = CUDAExtension('fused', ['fused.cpp', 'fused_kernel.cu'])  # reported\n"
        ),
        Example("from torch.utils.cpp_extension import CppExtension\next = CppExtension('fused', ['fused.cpp'])\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._inside_reported: list[cst.CSTNode] = []

    def _mark(self, node: cst.CSTNode) -> None:
        self._inside_reported.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified not in (f"{CPP_EXTENSION}.load", f"{CPP_EXTENSION}.load_inline"):
            return
        short = qualified.rsplit(".", 1)[1]
        sources = call_arg(node, "sources", 1)
        cuda_sources = call_arg(node, "cuda_sources", 2 if short == "load_inline" else None)
        with_cuda = call_arg(node, "with_cuda")
        uses_cuda = (
            (sources is not None and _names_cuda_source(sources.value))
            or (cuda_sources is not None and not (isinstance(cuda_sources.value, cst.Name) and cuda_sources.value.value == "None"))
            or (with_cuda is not None and isinstance(with_cuda.value, cst.Name) and with_cuda.value.value == "True")
        )
        if uses_cuda:
            self._mark(node)
            self.report(node, f"`{short}` JIT-builds CUDA sources, which cannot be compiled for Ascend", LOAD_SUGGESTION)

    def visit_Name(self, node: cst.Name) -> None:
        self._use(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._use(node)

    def _use(self, node: cst.CSTNode) -> None:
        if not self.ctx.is_outermost(node):
            return
        qualified = self.qualified_name(node)
        if qualified == f"{CPP_EXTENSION}.CUDAExtension" and not self.ctx.in_import(node):
            self._mark(node)
            self.report(node, "`CUDAExtension` builds CUDA kernels, which cannot be compiled for Ascend", EXTENSION_SUGGESTION)
        elif qualified == f"{CPP_EXTENSION}.CUDA_HOME" and not self.ctx.in_import(node):
            self.report(
                node,
                "`CUDA_HOME` is None without a CUDA toolkit",
                "remove the CUDA toolkit lookup; an NPU build needs torch_npu's paths (NpuExtension from torch_npu.utils.cpp_extension adds them)",
            )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._string(node)

    def visit_ConcatenatedString(self, node: cst.ConcatenatedString) -> None:
        self._string(node)

    def _string(self, node: cst.CSTNode) -> None:
        if isinstance(self.ctx.parent(node), cst.ConcatenatedString):
            return  # the whole concatenation is checked
        if not _is_cuda_source(string_value(node)) or self._in_reported(node):
            return
        self.report(
            node,
            f"{string_value(node)!r} names a CUDA source file, which cannot be built for Ascend",
            "rewrite the kernel as an Ascend C custom operator or with torch ops, and drop the file from the build",
        )

    def _in_reported(self, node: cst.CSTNode) -> bool:
        for ancestor in self.ctx.ancestors(node):
            if any(ancestor is reported for reported in self._inside_reported):
                return True
            if isinstance(ancestor, cst.Call):
                # CUDAExtension('x', [...'.cu']): its func name was reported already
                if any(self.ctx.parent(r) is ancestor for r in self._inside_reported):
                    return True
        return False
