"""NPU102: ``torch.cuda`` names that have no usable ``torch.npu`` counterpart."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.python.cst_util import from_import_names, string_value
from npu_migrate.python.rule import Example, Rule

from ._cuda_names import cuda_uses, is_cuda_name

#: Specific advice for the names real training code uses most; everything else
#: gets the generic suggestion.
SUGGESTIONS = {
    "torch.cuda.nvtx": "torch_npu has no NVTX; use torch_npu.profiler (mstx ranges) or drop the markers",
    "torch.cuda.profiler": (
        "cudaProfilerStart/Stop only gate an external CUDA profiler (nsys, nvprof); on Ascend, record the "
        "region with torch_npu.profiler.profile (prof.start() / prof.stop(), or "
        "schedule=torch_npu.profiler.schedule(...)), or run the job under msprof"
    ),
    "torch.cuda.get_device_capability": (
        "torch.npu.get_device_capability() returns None unless TORCH_NPU_DEVICE_CAPABILITY is set; "
        "branch on the feature you need (e.g. bf16: torch.npu.is_bf16_supported()) instead of a compute capability"
    ),
    "torch.cuda.CUDAGraph": "use torch.npu.NPUGraph (capture semantics differ; re-validate the captured region)",
    "torch.cuda.graph": "use torch.npu.graph with torch.npu.NPUGraph",
    "torch.cuda.graphs": "use torch.npu.NPUGraph / torch.npu.graph",
    "torch.cuda.make_graphed_callables": "use torch.npu.make_graphed_callables if your torch_npu provides it, else run eagerly",
    "torch.cuda.nccl": "NCCL is not available on Ascend; use torch.distributed with backend 'hccl'",
    "torch.cuda.jiterator": "jiterator compiles CUDA C++; write the op with torch ops or a torch_npu fused op",
    "torch.cuda.comm": "use torch.distributed collectives (backend 'hccl')",
    "torch.cuda.tunable": "TunableOp is CUDA/ROCm only; remove it on Ascend",
    "torch.cuda.OutOfMemoryError": "keep it: it is torch.OutOfMemoryError since torch 2.5, which NPU out-of-memory raises too (NPU922)",
    "torch.cuda.memory.OutOfMemoryError": "keep it: it is torch.OutOfMemoryError since torch 2.5, which NPU out-of-memory raises too (NPU922)",
}


#: torch._C._cuda_*/_nccl_* bindings real code calls, and their public NPU counterpart
BINDINGS = {
    "_cuda_getDeviceCount": "torch.npu.device_count()",
    "_cuda_getDevice": "torch.npu.current_device()",
    "_cuda_setDevice": "torch.npu.set_device(...)",
    "_cuda_synchronize": "torch.npu.synchronize()",
    "_cuda_emptyCache": "torch.npu.empty_cache()",
    "_cuda_isInBadFork": None,
    "_cuda_getArchFlags": None,
    "_cuda_clearCublasWorkspaces": None,
}
_TORCH_BINDING = re.compile(r"torch\._C\.(_(?:cuda|nccl|cudnn|cublas|cufft)\w*)")


def suggestion_for(qualified: str) -> str:
    for name in sorted(SUGGESTIONS, key=len, reverse=True):
        if qualified == name or qualified.startswith(name + "."):
            return SUGGESTIONS[name]
    reason = load_api().unusable_reason(qualified.replace("torch.cuda", "torch.npu", 1))
    if reason:
        return reason
    return "torch_npu has no equivalent; remove the call or guard it with `if torch.cuda.is_available():`"


class TorchCudaApiUnavailable(Rule):
    id = "NPU102"
    impact = "blocking"
    name = "torch-cuda-api-unavailable"
    summary = "Report `torch.cuda.X` uses that have no usable `torch.npu` counterpart"
    fixable = False
    triggers = ("cuda", "npu", "_cuda_*", "_nccl_*", "_cudnn_*")
    rationale = """
Some `torch.cuda` names do not exist in torch_npu (NVTX, `torch.cuda.nccl`,
jiterator, TunableOp...), and some exist but behave differently: on Ascend,
`get_device_capability()` returns None unless `TORCH_NPU_DEVICE_CAPABILITY`
is set, so `capability >= (8, 0)` checks silently take the wrong path. Renaming
them would produce code that fails at run time or quietly changes behaviour, so
they are reported with a concrete suggestion instead. CUDA graphs are reported
rather than rewritten because capture on NPU has different constraints.

torch's private CUDA bindings (`torch._C._cuda_getDeviceCount()`,
`torch._C._cuda_clearCublasWorkspaces()`, `torch._C._nccl_*`) do not exist in the
CPU build of torch that torch_npu runs on; they are reported with the public
`torch.npu` call that does the same where there is one. Attributes of a rewritten
call's result are not `torch.cuda` names (`torch.npu.get_device_properties(0).total_memory`),
except `.major`/`.minor` of the device properties, which NPU devices lack.
"""
    examples = (
        Example("import torch\ntorch.cuda.nvtx.range_push('step')  # reported\n"),
        Example("import torch\nmajor, minor = torch.cuda.get_device_capability()  # reported\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.api = load_api()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        # also once rewritten: a second run over migrated code still reports it
        if (
            isinstance(node, cst.Attribute)
            and node.attr.value in ("major", "minor")
            and isinstance(node.value, cst.Call)
            and self.ctx.qualified_name(node.value.func) in ("torch.cuda.get_device_properties", "torch.npu.get_device_properties")
        ):
            self.report(
                node,
                f"`.{node.attr.value}` of `get_device_properties(...)`: NPU device properties have no compute "
                "capability (torch_npu's `_NPUDeviceProperties` has name, total_memory, cube_core_num, "
                "vector_core_num, L2_cache_size)",
                SUGGESTIONS["torch.cuda.get_device_capability"],
            )
            return
        if self._torch_binding(node):
            return
        qualified = cuda_uses(self.ctx, node)
        if qualified is None or self.api.npu_name_for_cuda(qualified) is not None:
            return
        if qualified.endswith(".OutOfMemoryError") and "NPU922" in self.ctx.active:
            return  # NPU922 reports it: the handler catches NPU out-of-memory too
        self.report(node, f"`{qualified}` has no usable NPU counterpart", suggestion_for(qualified))

    def _torch_binding(self, node: cst.CSTNode) -> bool:
        """``torch._C._cuda_getDeviceCount()``: torch's private CUDA bindings, absent from
        the CPU build of torch that torch_npu runs on."""
        qualified = self.ctx.use_name(node)
        match = _TORCH_BINDING.fullmatch(qualified or "")
        if match is None:
            return False
        public = BINDINGS.get(match.group(1))
        suggestion = (
            f"use the public `{public}` (torch_npu provides it)" if public
            else "use the public torch.npu API for what it does, or drop it on Ascend"
        )
        self.report(node, f"`{qualified}` is a private CUDA binding of torch; the build torch_npu runs on has none", suggestion)
        return True

    def visit_Call(self, node: cst.Call) -> None:
        """``getattr(torch, "cuda")``: the module reached by a string, which no rename can follow."""
        if not (isinstance(node.func, cst.Name) and node.func.value == "getattr" and len(node.args) >= 2):
            return
        owner = self.ctx.qualified_name(node.args[0].value)
        if owner in ("torch", "torch.cuda") and string_value(node.args[1].value) is not None:
            name = f"{owner}.{string_value(node.args[1].value)}"
            if owner == "torch.cuda" and self.api.npu_name_for_cuda(name) is not None:
                return  # NPU101 renames the module: getattr(torch.npu, "X") works
            if is_cuda_name(name):
                self.report(
                    node,
                    f"`{name}` is reached through getattr with a string; left unchanged",
                    "use torch.npu (or torch.get_device_module('npu')) on Ascend",
                )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        for alias, full, _ in from_import_names(node):
            if is_cuda_name(full) and full != "torch.cuda" and self.api.npu_name_for_cuda(full) is None:
                self.report(alias, f"`{full}` has no usable NPU counterpart", suggestion_for(full))
