"""NPU914: torch.compile with the inductor backend (the default)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule

#: Backends that work on Ascend: device-generic debugging backends and torch_npu's own
#: (entry points of the torch-npu 2.13.0 wheel, group torch_dynamo_backends).
FINE = frozenset({"eager", "aot_eager", "aot_eager_decomp_partition", "npu", "npugraph_ex", "npugraphs"})
CUDA_ONLY = {
    "cudagraphs": 'backend="npugraphs" (torch_npu\'s NPU-graph backend)',
    "tensorrt": 'backend="npu" (torchair graph mode, bundled with torch_npu)',
    "torch_tensorrt": 'backend="npu" (torchair graph mode, bundled with torch_npu)',
}
SUGGESTION = (
    'pass backend="npu" (torchair graph mode, bundled with torch_npu 2.13; it falls back to eager when torch_npu '
    "was built without torchair), or keep inductor after installing triton-ascend, which torch_npu's inductor "
    'device backend for "npu" requires; backend="aot_eager" / "eager" to debug'
)
COMPILE = "torch.compile"
DYNAMO_OPTIMIZE = "torch._dynamo.optimize"


class TorchCompileInductor(Rule):
    id = "NPU914"
    name = "torch-compile-inductor"
    summary = "Report torch.compile with the inductor backend (also the default); suggest backend=\"npu\""
    fixable = False
    triggers = (("torch", "compile"), ("torch", "_dynamo"))
    local_names = (COMPILE, "torch._dynamo")  # `compile` alone is every `re.compile`
    rationale = """
`torch.compile` defaults to inductor, which generates Triton kernels for GPUs.
torch_npu 2.13 registers an inductor device backend for `npu`, but it needs the
separate triton-ascend package and warns and returns without it. The wheel's
`torch_dynamo_backends` entry points add `npu` (torchair graph mode, bundled
under `torch_npu/dynamo/torchair`), `npugraphs` and `npugraph_ex`. So a plain
`torch.compile(model)` or `backend="inductor"` is reported with
`backend="npu"` as the suggestion, `backend="cudagraphs"` with `"npugraphs"`;
`eager`/`aot_eager` and the NPU backends are left alone, as is a backend held in
a variable (not decidable statically). Not rewritten: the choice between graph
mode and installing triton-ascend is the user's, and graph mode can change
numerics and memory use.
"""
    examples = (
        Example("import torch\nmodel = torch.compile(model)  # reported\n"),
        Example("import torch\nmodel = torch.compile(model, backend='npu')\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified == COMPILE:
            self._check(node, call_arg(node, "backend"), "torch.compile")
        elif qualified == DYNAMO_OPTIMIZE:
            self._check(node, call_arg(node, "backend", 0), "torch._dynamo.optimize")

    def visit_Decorator(self, node: cst.Decorator) -> None:
        # bare @torch.compile: default backend
        if not isinstance(node.decorator, cst.Call) and self.qualified_name(node.decorator) == COMPILE:
            self._check(node.decorator, None, "torch.compile")

    def _check(self, node: cst.CSTNode, backend: cst.Arg | None, what: str) -> None:
        if backend is not None and backend.star:
            return
        if backend is None and isinstance(node, cst.Call) and any(arg.star for arg in node.args):
            return  # backend may come from *args / **kwargs
        if backend is None:
            self.report(node, f"`{what}` without a backend uses inductor, which needs triton-ascend on NPU", SUGGESTION)
            return
        name = string_value(backend.value)
        if name is None or name in FINE:
            return  # a variable or callable backend: cannot decide
        if name in CUDA_ONLY:
            self.report(node, f"`{what}` backend {name!r} is CUDA-only", f"use {CUDA_ONLY[name]}")
        elif name == "inductor":
            self.report(node, f"`{what}` backend 'inductor' needs triton-ascend on NPU", SUGGESTION)
