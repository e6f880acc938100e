"""NPU302: the GPU-implicit autocast state helpers get the explicit device ``"npu"``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example, Rule

from ._common import NPU

#: old name -> (new name, number of arguments the old CUDA-implicit form takes)
HELPERS = {
    "torch.get_autocast_gpu_dtype": ("get_autocast_dtype", 0),
    "torch.set_autocast_gpu_dtype": ("set_autocast_dtype", 1),
    "torch.is_autocast_enabled": ("is_autocast_enabled", 0),
    "torch.set_autocast_enabled": ("set_autocast_enabled", 1),
}


class AutocastGpuState(Rule):
    id = "NPU302"
    name = "autocast-gpu-state"
    summary = 'Give `torch.get/set_autocast_gpu_dtype()` and argument-less `torch.is/set_autocast_enabled()` the device "npu"'
    triggers = ("get_autocast_gpu_dtype", "set_autocast_gpu_dtype", "is_autocast_enabled", "set_autocast_enabled")
    rationale = """
These torch functions implicitly mean CUDA: in torch 2.13,
`torch.get_autocast_gpu_dtype()` and `torch.set_autocast_gpu_dtype(dtype)` are
deprecated in favour of `torch.get_autocast_dtype("cuda")` /
`torch.set_autocast_dtype("cuda", dtype)`, and `torch.is_autocast_enabled()` /
`torch.set_autocast_enabled(flag)` without a device act on CUDA. Under
`torch.amp.autocast("npu")` they answer for the wrong device (the enabled check
is False, the dtype is CUDA's), so custom autograd functions that consult them
silently skip their mixed-precision path. They become the device-explicit forms
with `"npu"`: `torch.get_autocast_dtype("npu")`, `torch.set_autocast_dtype("npu", dtype)`,
`torch.is_autocast_enabled("npu")`, `torch.set_autocast_enabled("npu", flag)`.
torch_npu answers these for its PrivateUse1 device (`torch.npu.get_autocast_dtype`
and friends wrap the same state; `transfer_to_npu` maps
`torch.get_autocast_gpu_dtype` to it at run time). Calls that already pass a
device are left alone; calls through a from-import (`from torch import
get_autocast_gpu_dtype`) are reported.
"""
    examples = (
        Example(
            "import torch\nif torch.is_autocast_enabled():\n    x = x.to(torch.get_autocast_gpu_dtype())\n",
            'import torch\nimport torch_npu\nif torch.is_autocast_enabled("npu"):\n    x = x.to(torch.get_autocast_dtype("npu"))\n',
        ),
        Example("import torch\nprint(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu'))\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified not in HELPERS:
            return
        new_name, arity = HELPERS[qualified]
        if any(a.star or a.keyword is not None for a in node.args) or len(node.args) != arity:
            return  # already device-explicit (or not a form we know)
        target = f"torch.{new_name}"
        if not isinstance(node.func, cst.Attribute):
            self.report(node, f"`{qualified}()` acts on CUDA", f'call `{target}("npu"{", ..." if arity else ""})` instead')
            return

        def rewrite(call: cst.Call) -> cst.Call:
            func = call.func.with_changes(attr=cst.Name(new_name))
            first = cst.Arg(cst.SimpleString(NPU))
            if call.args:
                first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            return call.with_changes(func=func, args=[first, *call.args])

        self.replace(node, rewrite, f'`{qualified}()` -> `{target}("npu", ...)`')
