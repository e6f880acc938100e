"""NPU602: cudnn flags and CUDA version checks, reported with their NPU equivalent."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example

from ._common import FlagUseRule

CUDNN = "torch.backends.cudnn"
ADVICE = {
    f"{CUDNN}.benchmark": (
        "no effect on NPU and nothing to replace: operators are compiled and cached by CANN itself; "
        "keep the line (harmless) or drop it"
    ),
    f"{CUDNN}.deterministic": (
        "no effect on NPU: use torch.use_deterministic_algorithms(True) (torch_npu keeps "
        "torch.npu.set_deterministic_level in sync with it) and set HCCL_DETERMINISTIC=true for "
        "deterministic collectives"
    ),
    f"{CUDNN}.enabled": "no effect on NPU (there is no cuDNN); convolutions run on CANN kernels whatever its value",
    f"{CUDNN}.version": "there is no cuDNN on NPU; for the software stack report torch.version.cann (set by torch_npu) and importlib.metadata.version('torch-npu')",
    f"{CUDNN}.is_available": "False on NPU; test torch.npu.is_available() if the check guards accelerator code",
    "torch.version.cuda": (
        "None on the CPU torch build that torch_npu runs on, so `if torch.version.cuda:` branches are skipped; "
        "on NPU use torch.version.cann (the CANN version, set when torch_npu is imported) or importlib.metadata.version('torch-npu')"
    ),
    "torch.backends.cuda.is_built": "False on the CPU torch build torch_npu needs; use torch.npu.is_available()",
    "torch.backends.cuda.preferred_linalg_library": (
        "CUDA-only (cuSOLVER/MAGMA choice); set, it raises on the CPU torch build torch_npu runs on; no NPU "
        "counterpart, keep it for CUDA runs only"),
    "torch.backends.cuda.preferred_blas_library": (
        "CUDA-only (cuBLAS/cuBLASLt choice); set, it raises on the CPU torch build torch_npu runs on (`Cannot set "
        "preferred backend to cuBLASLt`); no NPU counterpart, keep it for CUDA runs only"),
    "torch.backends.cuda.cufft_plan_cache": "CUDA-only; no NPU counterpart, remove it",
}
GENERIC = "cuDNN settings have no effect on NPU; remove the line or keep it for CUDA runs only"


class CudnnFlags(FlagUseRule):
    id = "NPU602"
    impact = "informational"
    name = "cudnn-flags"
    summary = "Report cudnn flags, `torch.version.cuda` and other CUDA backend switches, with what to use on NPU"
    fixable = False
    triggers = ("cudnn", ("version", "cuda"), "is_built", "preferred_linalg_library", "preferred_blas_library",
                "cufft_plan_cache")
    rationale = """
`torch.backends.cudnn.*` and `torch.version.cuda` do not fail on NPU; they just
stop meaning anything, which is worse: a training script that relied on
`cudnn.deterministic = True` for reproducibility silently loses it, and code
guarded by `if torch.version.cuda:` is skipped (torch_npu requires the CPU build
of torch, where it is None). Each use (read or write) is reported with the NPU
equivalent:

- `deterministic` -> `torch.use_deterministic_algorithms(True)` (torch_npu's
  `set_deterministic_level` keeps itself in sync with it) plus
  `HCCL_DETERMINISTIC=true` (an env var torch_npu 2.13 reads) for reductions
  across devices;
- `benchmark` -> nothing to do (CANN compiles and caches operators itself);
- `torch.version.cuda` -> `torch.version.cann`, which torch_npu sets at import
  (`utils/collect_env.py::_add_collect_env_methods`), or `importlib.metadata.version('torch-npu')`.

Nothing is rewritten: whether the line should go, stay for CUDA runs, or turn
into a deterministic-mode switch is the author's decision. `allow_tf32` is
NPU601's (it has a real counterpart).
"""
    examples = (
        Example("import torch\ntorch.backends.cudnn.deterministic = True  # reported\n"),
        Example("from torch.backends import cudnn\ncudnn.benchmark = True  # reported\n"),
    )

    def check(self, node: cst.Attribute | cst.Name, qualified: str) -> None:
        if qualified == f"{CUDNN}.allow_tf32":
            return
        advice = next((ADVICE[k] for k in ADVICE if qualified == k or qualified.startswith(k + ".")), None)
        if advice is None and (qualified == CUDNN or qualified.startswith(CUDNN + ".")):
            advice = GENERIC
        if advice is not None:
            effect = "is CUDA-only" if qualified.endswith("_library") else "has no effect on NPU"
            self.report(node, f"`{qualified}` {effect}", advice)
