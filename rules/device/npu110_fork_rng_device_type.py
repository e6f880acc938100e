"""NPU110: ``torch.random.fork_rng`` over NPU devices says which device type it forks."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.rule import Example, Rule
from npu_migrate.rules.parallel._common import with_keyword

FORK_RNG = "torch.random.fork_rng"


class ForkRngDeviceType(Rule):
    id = "NPU110"
    name = "fork-rng-device-type"
    summary = "Add `device_type=\"npu\"` to `fork_rng(devices=...)` whose devices the migration makes NPU devices"
    triggers = ("fork_rng",)
    local_names = (FORK_RNG,)
    only_in_device_files = True
    rationale = """
`torch.random.fork_rng(devices=...)` saves and restores the RNG state of the
listed devices of one device type. Without `device_type=`, torch up to 2.11
forks **CUDA's** generators (torch 2.12 and later take the current
accelerator). Code that lists its devices with `torch.cuda.current_device()`
or `range(torch.cuda.device_count())` gets those calls renamed to `torch.npu`
(NPU101), and on torch <= 2.11 `fork_rng` would then ask `torch.cuda` for the
state of NPU indices: an error on Ascend, where CUDA has no device, or, with
`devices` left to its default, no NPU generator restored at all (the seeded
region silently changes the NPU random stream).

So the call gets `device_type="npu"` where that is provably what it forks:

* its `devices` argument spells a `torch.cuda` call that NPU101 renames, or is a
  local name whose every assignment in its scope does (or is an empty list);
  the edit depends on those renames and is dropped with them (a kernel gate
  that keeps `torch.cuda`). Code that says `torch.npu` already (migrated by an
  earlier version, or by hand) gets the same edit;
* anything else in `devices` (a parameter, an attribute, a literal list) is
  reported: the tool cannot tell which device type those indices belong to.

A call that passes `device_type=` already, or no `devices` at all, is left
alone (without `devices`, torch 2.12+ takes the current accelerator, and the
tool cannot prove which one older code meant). Where torch_npu is missing (a
CPU machine), the import guard makes `"npu"` a device type torch knows, so
the region runs as the CUDA original did there.
"""
    examples = (
        Example(
            "import torch\n"
            "import torch_npu\n"
            "devices = [torch.npu.current_device()] if torch.npu.is_available() else []\n"
            "with torch.random.fork_rng(devices=devices):\n"
            "    torch.manual_seed(0)\n",
            "import torch\n"
            "import torch_npu\n"
            "devices = [torch.npu.current_device()] if torch.npu.is_available() else []\n"
            'with torch.random.fork_rng(devices=devices, device_type="npu"):\n'
            "    torch.manual_seed(0)\n",
        ),
        Example(
            "import torch\n"
            "def sample(devices):\n"
            "    with torch.random.fork_rng(devices=devices, device_type='cuda'):\n"
            "        return torch.rand(2)\n"
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) == FORK_RNG and call_arg(node, "device_type", 4) is None:
            self.calls.append(node)

    def leave_file(self) -> None:
        for call in self.calls:
            devices = call_arg(call, "devices", 0)
            value = devices.value if devices is not None else None
            if value is None or (isinstance(value, cst.Name) and value.value == "None") or (
                    isinstance(value, (cst.List, cst.Tuple)) and not value.elements):
                continue  # no devices, or all of the current type: nothing this tool can prove
            renamed = self._device_calls(devices.value)
            if renamed:
                quote = self.ctx.quote
                self.replace(call, lambda c, q=quote: with_keyword(c, "device_type", f"{q}npu{q}"),
                             "`fork_rng(devices=...)` over NPU devices -> `device_type=\"npu\"`",
                             anchor=devices.value,
                             requires=tuple(n for n in renamed if self.qualified_name(n).startswith("torch.cuda.")),
                             reason="its devices come from `torch.cuda` calls renamed to `torch.npu`; without "
                                    "`device_type` torch <= 2.11 forks CUDA's generators")
            else:
                text = self.ctx.module.code_for_node(devices.value)
                self.report(devices.value, f"`fork_rng(devices={text})` names no device type",
                            'add device_type="npu" if these are NPU device indices (torch <= 2.11 forks CUDA\'s '
                            "generators by default)")

    def _device_calls(self, value: cst.BaseExpression) -> list[cst.CSTNode]:
        """The ``torch.cuda`` / ``torch.npu`` attributes ``value`` is made of, directly or
        through the assignments of a local name; empty when any part of it is something
        else."""
        if isinstance(value, cst.Name):
            values = self.ctx.plain_values(value)
            if not values:
                return []
            found: list[cst.CSTNode] = []
            for assigned in values:
                if isinstance(assigned, (cst.List, cst.Tuple)) and not assigned.elements:
                    continue
                attrs = self._device_attributes(assigned)
                if not attrs:
                    return []
                found += attrs
            return found
        return self._device_attributes(value)

    def _device_attributes(self, value: cst.CSTNode) -> list[cst.CSTNode]:
        found: list[cst.CSTNode] = []

        class _Find(cst.CSTVisitor):
            def visit_Attribute(inner, node: cst.Attribute) -> bool:
                qualified = self.qualified_name(node) or ""
                if qualified.startswith(("torch.cuda.", "torch.npu.")):
                    found.append(node)
                    return False
                return True

        value.visit(_Find())
        return found

