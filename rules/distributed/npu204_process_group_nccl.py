"""NPU204: direct uses of ``ProcessGroupNCCL`` are reported."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import from_import_names
from npu_migrate.python.rule import Example, Rule

_PREFIXES = (
    "torch.distributed.ProcessGroupNCCL",
    "torch.distributed.distributed_c10d.ProcessGroupNCCL",
    "torch._C._distributed_c10d.ProcessGroupNCCL",
)
SUGGESTION = (
    "the HCCL process group is ProcessGroupHCCL from torch_npu's private C extension module _C._distributed_c10d (options: "
    "ProcessGroupHCCL.Options, passed as pg_options to init_process_group/new_group with backend='hccl'); "
    "its options differ from NCCL's, so port the settings by hand, or drop the direct use and let backend='hccl' create it"
)


class ProcessGroupNccl(Rule):
    id = "NPU204"
    impact = "blocking"
    name = "process-group-nccl"
    summary = "Report direct uses of `ProcessGroupNCCL` and its `Options`"
    fixable = False
    triggers = ("ProcessGroupNCCL",)
    rationale = """
`torch.distributed.ProcessGroupNCCL` (often `ProcessGroupNCCL.Options()` for
`is_high_priority_stream`, or `isinstance(pg, ProcessGroupNCCL)` checks) does not
exist without NCCL. torch_npu's process group is
`ProcessGroupHCCL` in torch_npu's private `_C._distributed_c10d` module, with its own `Options`
(`torch_npu/_init/registry/distributed.py` builds one for every hccl group),
but it is a private module and its options are not NCCL's, so the use is
reported, not rewritten. `torch_npu.contrib.transfer_to_npu` aliases the name at
run time; a static migration should not depend on that.
"""
    examples = (Example("import torch.distributed as dist\nopts = dist.ProcessGroupNCCL.Options()  # reported\n"),)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        qualified = self.ctx.use_name(node)
        if qualified and any(qualified == p or qualified.startswith(p + ".") for p in _PREFIXES):
            self.report(node, f"`{qualified}` does not exist on Ascend", SUGGESTION)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        for alias, full, _ in from_import_names(node):
            if full in _PREFIXES:
                self.report(alias, f"`{full}` does not exist on Ascend", SUGGESTION)
