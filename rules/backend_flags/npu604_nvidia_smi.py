"""NPU604: ``nvidia-smi`` commands, reported with the ``npu-smi`` / torch.npu alternatives."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python.cst_util import string_value
from npu_migrate.python.rule import Example, Rule

_COMMAND = re.compile(r"^\s*(?:\S*/)?nvidia-smi(?:\s|$)")
_WORD = re.compile(r"(?<![\w-])nvidia-smi(?![\w-])")
PROCESS_CALLS = frozenset(
    {
        "os.system",
        "os.popen",
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "shutil.which",
    }
)
SUGGESTION = (
    "on Ascend the driver tool is `npu-smi` (`npu-smi info` lists devices, utilisation and memory; its output "
    "format differs, so parsing code must change); inside the training process prefer torch.npu.mem_get_info(), "
    "torch.npu.utilization(), torch.npu.get_device_name()"
)


class NvidiaSmi(Rule):
    id = "NPU604"
    name = "nvidia-smi"
    summary = "Report `nvidia-smi` commands (subprocess, os.system, os.popen) and suggest `npu-smi info`"
    fixable = False
    triggers = ("nvidia-smi",)
    rationale = """
`nvidia-smi` does not exist on Ascend machines: the call fails (or, with
`shell=True`, returns an error string that parsing code then misreads). The
counterpart is CANN's `npu-smi` (`npu-smi info`), but its options and output
differ from `--query-gpu=... --format=csv`, so the command and the code that
parses it have to be ported by hand. For memory and utilisation from inside
Python, torch_npu offers `torch.npu.mem_get_info()`, `torch.npu.utilization()`
and `torch.npu.get_device_name()`.

A string is reported when it starts with the command (`"nvidia-smi ..."`,
`["nvidia-smi", ...]`, `"/usr/bin/nvidia-smi"`, f-strings too), or mentions it
anywhere inside a process call (`os.system`, `os.popen`, `subprocess.*`,
`shutil.which`). Prose such as log messages is left alone.
"""
    examples = (
        Example('import subprocess\nout = subprocess.check_output("nvidia-smi --query-gpu=memory.used --format=csv", shell=True)  # reported\n'),
        Example('print("see nvidia-smi for details")\n'),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None:
            self._check(node, value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        parts = node.parts
        leading = parts[0].value if parts and isinstance(parts[0], cst.FormattedStringText) else ""
        text = " ".join(p.value for p in parts if isinstance(p, cst.FormattedStringText))
        if _COMMAND.match(leading) or (_WORD.search(text) and self._in_process_call(node)):
            self._report(node)

    def _check(self, node: cst.CSTNode, value: str) -> None:
        if _COMMAND.match(value) or (_WORD.search(value) and self._in_process_call(node)):
            self._report(node)

    def _in_process_call(self, node: cst.CSTNode) -> bool:
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, cst.Call) and self.qualified_name(ancestor.func) in PROCESS_CALLS:
                return True
            if isinstance(ancestor, cst.BaseStatement):
                return False
        return False

    def _report(self, node: cst.CSTNode) -> None:
        self.report(node, "`nvidia-smi` does not exist on Ascend machines", SUGGESTION)
