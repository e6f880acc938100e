"""NPU105: integer device indices passed as devices (``.to(local_rank)``)."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import call_arg, last_name, string_literal
from npu_migrate.python.imports import guard_text
from npu_migrate.python.rule import Example, Rule

#: Names that hold a device *index* in real training code.
_INDEX_NAME = re.compile(r"^(local_rank|rank|gpu|gpus?_id|gpu_idx|device_id|device_idx|device_index|dev_id|local_gpu|cuda_id)$")


def _index_name(node: cst.BaseExpression) -> str | None:
    """``local_rank`` / ``args.gpu`` / ``self.local_rank``: the last name, if it says "index"."""
    last = last_name(node)
    return last if last is not None and _INDEX_NAME.match(last) else None


def _is_int_value(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return True
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "int"


class IntegerDevice(Rule):
    id = "NPU105"
    name = "integer-device"
    summary = "Make integer device indices explicit NPU devices: `.to(local_rank)` -> `.to(f\"npu:{local_rank}\")`"
    triggers = ("cuda", "npu", "is_npu", "torch_npu")
    targets = ("npu", "cpu")
    only_in_device_files = True
    runs_with_other_rules = True
    #: Where it acts: `.to(0)` / `torch.device(0)` / `device=0`, or the same with an
    #: index-like name (`args.gpu`; comments may sit before it), and every assignment
    #: to an index-like name (all of them decide whether the name is an int).
    local_triggers = (
        re.compile(r"\b(?:(?:to|device)\(|device\s*=)(?:\s|#[^\r\n]*)*\(*\s*(?:\d|(?:[\w.]*\.)?"
                   + _INDEX_NAME.pattern.strip("^$") + r"\b)"),
        re.compile(r"\b" + _INDEX_NAME.pattern.strip("^$") + r"\s*=(?!=)"),
    )
    rationale = """
CUDA code often passes a bare index as the device: `model.to(local_rank)`,
`x.to(0)`, `torch.device(args.gpu)`. What an integer means depends on the torch
version: torch 2.13 resolves it to the *current accelerator* (the NPU once
torch_npu is imported), older releases resolved it to CUDA, and torch_npu's own
run-time patcher is known to miss it. The migrated code says what it means:

* an integer literal, or a name whose every assignment in the file is an int
  literal or `int(...)` (`local_rank = int(os.environ["LOCAL_RANK"])`), becomes
  `"npu:N"` / `f"npu:{local_rank}"`;
* a name that looks like a device index (`local_rank`, `rank`, `gpu`, `device_id`,
  `args.gpu`, ...) but cannot be proven to be an int is reported with the exact
  replacement;
* anything else passed to `.to()` (a device, a dtype, a tensor) is left alone.

Only files about a device are looked at: files that name CUDA or the NPU
(`cuda`, `npu`, `is_npu`, `torch_npu`), and files this run migrates in a way
that needs torch_npu. In device-generic code an index is already correct; and
since migrated code names the NPU where the original named CUDA, a second run
over it reports the same names as the first.
"""
    examples = (
        Example(
            'import os\nimport torch\nlocal_rank = int(os.environ["LOCAL_RANK"])\nmodel = torch.nn.Linear(2, 2).to(local_rank)\ntorch.cuda.set_device(local_rank)\n',
            (
                "import os\n"
                "import torch\n"
                "\n"
                + guard_text() +
                "\n"
                'local_rank = int(os.environ["LOCAL_RANK"])\n'
                'model = torch.nn.Linear(2, 2).to(f"npu:{local_rank}")\n'
                "torch.cuda.set_device(local_rank)\n"
            ),
        ),
        Example("import torch\nx = torch.zeros(2).to(torch.float16)\ny = x.to(device)\nprint('cuda')\n"),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.candidates: list[tuple[cst.BaseExpression, cst.Arg]] = []
        self.assigned: dict[str, list[cst.BaseExpression]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.assigned.setdefault(target.target.value, []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "to":
            arg = call_arg(node, "device", 0)
        elif self.qualified_name(func) == "torch.device" and len(node.args) == 1:
            arg = call_arg(node, None, 0)
        else:
            return
        if arg is not None and arg.keyword is None or (arg is not None and arg.keyword.value == "device"):
            self.candidates.append((node, arg))

    def leave_file(self) -> None:
        device = self.ctx.target.device
        for call, arg in self.candidates:
            value = arg.value
            if isinstance(value, cst.Integer):
                self.replace(arg, lambda a, v=value.value, d=device: a.with_changes(value=string_literal(f"{d}:{v}", self.ctx.quote)),
                             f"integer device {value.value} -> \"{device}:{value.value}\"", anchor=value)
                continue
            name = _index_name(value)
            if name is None:
                continue
            text = self.ctx.module.code_for_node(value)
            if isinstance(value, cst.Name) and self.assigned.get(name) and all(map(_is_int_value, self.assigned[name])):
                self.replace(arg, lambda a, t=text, q=self.ctx.quote, d=device: a.with_changes(value=cst.parse_expression(f"f{q}{d}:{{{t}}}{q}")),
                             f"integer device `{text}` -> f\"{device}:{{{text}}}\"", anchor=value)
            else:
                self.report(value, f"`{text}` looks like an integer device index",
                            f'write f"npu:{{{text}}}" if it is one (an int means the current accelerator only in recent torch)')
