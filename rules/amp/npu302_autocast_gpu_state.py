"""NPU302: the GPU-implicit autocast state helpers get the explicit device ``"npu"``."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import string_literal
from npu_migrate.python.imports import guard_text, npu_device_type
from npu_migrate.python.rule import Example, Rule
from npu_migrate.python.version_fallback import FALLBACK_MESSAGE, in_version_fallback

from ._common import with_first_arg

#: old name -> (new name, number of arguments the old CUDA-implicit form takes)
HELPERS = {
    "torch.get_autocast_gpu_dtype": ("get_autocast_dtype", 0),
    "torch.set_autocast_gpu_dtype": ("set_autocast_dtype", 1),
    "torch.is_autocast_enabled": ("is_autocast_enabled", 0),
    "torch.set_autocast_enabled": ("set_autocast_enabled", 1),
}


#: Loss scalers whose ``device`` parameter defaults to ``"cuda"``.
SCALERS = (
    "torch.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
)


class AutocastGpuState(Rule):
    id = "NPU302"
    targets = ("npu", "cpu")
    name = "autocast-gpu-state"
    summary = 'Give CUDA-implicit AMP calls the device "npu": `torch.get/set_autocast_gpu_dtype()`, argument-less `torch.is/set_autocast_enabled()`, `GradScaler()`, `ShardedGradScaler()`'
    triggers = ("get_autocast_gpu_dtype", "set_autocast_gpu_dtype", "is_autocast_enabled", "set_autocast_enabled",
                "GradScaler", "ShardedGradScaler")
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
get_autocast_gpu_dtype`) are reported, and so is the argument-less form in the
`except TypeError:` fallback of a `try` that already passes the device (the fallback
runs only on a torch before 2.4, where the device argument is what raises:
`npu_migrate/python/version_fallback.py`).

The loss scalers `torch.amp.GradScaler()` and FSDP's `ShardedGradScaler()`
(`torch.distributed.fsdp.sharded_grad_scaler`) default to `device="cuda"`; without
a device they get `"npu"` as their first argument. (torch_npu replaces the FSDP
module's `ShardedGradScaler` with its own class defaulting to "npu", but only for
lookups made after `import torch_npu`; the explicit device does not depend on
import order.)
"""
    examples = (
        Example(
            "import torch\nif torch.is_autocast_enabled():\n    x = x.to(torch.get_autocast_gpu_dtype())\n",
            (
                "import torch\n"
                "\n"
                + guard_text(fallback=(npu_device_type(),)) +
                "\n"
                'if torch.is_autocast_enabled("npu"):\n'
                '    x = x.to(torch.get_autocast_dtype("npu"))\n'
            ),
        ),
        Example(
            "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\nscaler = ShardedGradScaler(init_scale=2.0**10)\n",
            (
                "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n"
                "\n"
                + guard_text() +
                "\n"
                'scaler = ShardedGradScaler("npu", init_scale=2.0**10)\n'
            ),
        ),
        Example("import torch\nprint(torch.is_autocast_enabled('cpu'), torch.get_autocast_dtype('cpu'))\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in SCALERS:
            self._scaler(node, qualified)
        if qualified not in HELPERS:
            return
        new_name, arity = HELPERS[qualified]
        if any(a.star or a.keyword is not None for a in node.args) or len(node.args) != arity:
            return  # already device-explicit (or not a form we know)
        target = f"torch.{new_name}"
        if in_version_fallback(self.ctx, node, {qualified.rsplit(".", 1)[1], new_name}):
            self.report(node, f"`{qualified}()` {FALLBACK_MESSAGE}",
                        f"on a torch without `{target}(device)`, torch_npu's `torch.npu.{new_name}({'...' if arity else ''})` "
                        "answers for the NPU")
            return
        if not isinstance(node.func, cst.Attribute):
            self.report(node, f"`{qualified}()` acts on CUDA", f'call `{target}("npu"{", ..." if arity else ""})` instead')
            return

        def rewrite(call: cst.Call) -> cst.Call:
            func = call.func.with_changes(attr=cst.Name(new_name))
            first = cst.Arg(string_literal(self.ctx.target.device, self.ctx.quote))
            if call.args:
                first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            return call.with_changes(func=func, args=[first, *call.args])

        self.replace(node, rewrite, f'`{qualified}()` -> `{target}("npu", ...)`')

    def _scaler(self, node: cst.Call, qualified: str) -> None:
        if any(a.keyword is None or a.keyword.value == "device" for a in node.args):
            return  # a device is given (or positional arguments make it unknowable)

        short = qualified.rsplit(".", 1)[1]
        self.replace(node, lambda call: with_first_arg(call, cst.Arg(string_literal(self.ctx.target.device, self.ctx.quote))),
                     f'`{short}()` defaults to device "cuda" -> `{short}("npu", ...)`')
