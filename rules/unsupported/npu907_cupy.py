"""NPU907: CuPy and PyCUDA."""

from __future__ import annotations

from npu_migrate.python.rule import Example

from ._common import CudaOnlyPackage

_KERNEL = "rewrite the kernel with torch ops on the npu device, or as an Ascend C custom operator"


class CupyPycuda(CudaOnlyPackage):
    id = "NPU907"
    impact = "blocking"
    name = "cupy-pycuda"
    summary = "Report CuPy / PyCUDA imports and their raw CUDA kernels"
    label = "CuPy/PyCUDA"
    packages = ("cupy", "cupyx", "pycuda")
    problem = "CuPy and PyCUDA are CUDA array/kernel libraries with no Ascend backend"
    import_suggestion = (
        "use torch tensors on the npu device (torch ops cover most of the NumPy-like API; torch.from_numpy / "
        ".numpy() for host arrays), or NumPy on the host"
    )
    uses = {
        "cupy.RawKernel": _KERNEL,
        "cupy.ElementwiseKernel": _KERNEL,
        "cupy.ReductionKernel": _KERNEL,
        "cupy.RawModule": _KERNEL,
        "pycuda.compiler.SourceModule": _KERNEL,
    }
    triggers = ("cupy", "cupyx", "pycuda")
    rationale = """
CuPy arrays live in CUDA memory and PyCUDA drives the CUDA driver API directly;
neither has an Ascend backend. Array code maps to torch tensors on the `npu`
device, and raw CUDA kernels (`RawKernel`, `ElementwiseKernel`, `SourceModule`)
have to be rewritten with torch ops or as Ascend C custom operators.
"""
    examples = (
        Example("import cupy as cp  # reported\n"),
        Example("import numpy as np\nx = np.zeros(3)\n"),
    )
