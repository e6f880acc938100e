"""NPU923: timm's ``NativeScaler()`` -> ``NativeScaler(device="npu")`` where timm takes a device."""

from __future__ import annotations

import libcst as cst
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from npu_migrate.python.cst_util import string_literal
from npu_migrate.python.rule import Example, Rule

NAMES = ("timm.utils.NativeScaler", "timm.utils.cuda.NativeScaler")
#: timm/utils/cuda.py: `def __init__(self, device='cuda')` first appears in 1.0.12
#: (1.0.11 and every earlier release: `def __init__(self)` with torch.cuda.amp.GradScaler()).
FIRST_WITH_DEVICE = Version("1.0.12")


def takes_device(specifier: str) -> bool:
    """Every timm that ``specifier`` allows has ``NativeScaler(device=...)``."""
    try:
        specs = SpecifierSet(specifier)
    except InvalidSpecifier:
        return False
    for spec in specs:
        if spec.version.endswith(".*"):
            continue
        version = Version(spec.version)
        if spec.operator in ("==", "===", ">=", "~=") and version >= FIRST_WITH_DEVICE:
            return True
        if spec.operator == ">" and version >= Version("1.0.11"):
            return True
    return False


class TimmNativeScaler(Rule):
    id = "NPU923"
    name = "timm-native-scaler"
    summary = "Give timm's `NativeScaler()` the npu device (timm >= 1.0.12), else report it"
    triggers = ("NativeScaler",)
    fixable = True
    rationale = """
timm's `NativeScaler` (DeiT, ConvNeXt, InternVL's classification code) builds
its own GradScaler: `torch.cuda.amp.GradScaler()` up to timm 1.0.11, and
`torch.amp.GradScaler(device=device)` with `device='cuda'` by default from timm
1.0.12 (read from the published wheels' `timm/utils/cuda.py`, 0.9.16 and
1.0.3-1.0.12). A CUDA GradScaler on a machine without CUDA disables itself with
a warning, while `autocast("npu")` still runs fp16: training silently runs fp16
without loss scaling, and the scaler's checkpoint state is `{}` (DeiT).

Where the project's dependency files allow only timm >= 1.0.12
(`timm>=1.0.12`, `timm==1.0.15`), `NativeScaler()` becomes
`NativeScaler(device="npu")`. Otherwise (an older pin such as DeiT's
`timm==0.3.2`, or no pin) the call is reported: pass the device after pinning
timm >= 1.0.12, or build the scaler as `torch.amp.GradScaler("npu")` in a
small wrapper with the same `__call__`/`state_dict`.
"""
    examples = (
        Example("from timm.utils import NativeScaler\nloss_scaler = NativeScaler()  # reported\n"),
        Example("from timm.utils import NativeScaler\nloss_scaler = NativeScaler(device=args.device)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) not in NAMES:
            return
        if any(a.keyword is not None and a.keyword.value == "device" for a in node.args) or node.args:
            return  # a device (or anything else) is passed already
        spec = self.ctx.facts.timm_specifier
        if takes_device(spec):
            device = cst.Arg(keyword=cst.Name("device"), value=string_literal("npu", self.ctx.quote),
                             equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                   whitespace_after=cst.SimpleWhitespace("")))
            self.replace(node, lambda n: n.with_changes(args=[device]),
                         'timm `NativeScaler()` -> `NativeScaler(device="npu")` (a CUDA GradScaler disables itself on NPU)')
            return
        pinned = f"timm{spec}" if spec else "an unpinned timm"
        self.report(node, f"timm's `NativeScaler()` builds a CUDA GradScaler, which disables itself on NPU "
                    f"(fp16 without loss scaling); the project allows {pinned}",
                    'pin timm>=1.0.12 and pass NativeScaler(device="npu"), or use torch.amp.GradScaler("npu") '
                    "in a wrapper with the same __call__/state_dict")
