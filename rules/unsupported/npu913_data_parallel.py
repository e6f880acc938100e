"""NPU913: nn.DataParallel that NPU510 does not rewrite."""

from __future__ import annotations

import libcst as cst
from npu_migrate.rules.parallel._common import DATA_PARALLEL, FUNCTIONAL, REWRITER, plan

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.rule import Example, Rule

SUGGESTION = (
    "use DistributedDataParallel, one process per NPU: launch with torchrun --nproc_per_node=<NPUs>, "
    "call npu_runtime.init_data_parallel() at the start, and wrap the whole model with "
    "npu_runtime.data_parallel(model) (DDP on this process's NPU under torchrun, a thin wrapper "
    "with the same `module.` keys in one process); give the training loader a DistributedSampler"
)
SUBCLASS_SUGGESTION = (
    "DDP replaces DataParallel's replicate/scatter/gather, so these overrides have no counterpart: "
    "move what they do into the model or the data loader, then wrap with npu_runtime.data_parallel(model)"
)

WHOLE_MODEL = "wrap the whole model: `model = npu_runtime.data_parallel(model)`"


class DataParallel(Rule):
    id = "NPU913"
    impact = "blocking"
    name = "data-parallel"
    summary = "Report nn.DataParallel that NPU510 cannot rewrite (subclasses, functional form, nested wrappers)"
    fixable = False
    triggers = ("DataParallel", "data_parallel")
    rationale = """
`torch.nn.DataParallel` cannot run on Ascend: it replicates the module with
`torch._C._broadcast_coalesced` and scatters inputs with `torch._C._scatter`,
bindings only CUDA builds of torch define (even with a single NPU the scatter
fails at the first forward). The Ascend way is DistributedDataParallel with the
HCCL backend, one process per NPU. NPU510 makes that rewrite wherever it is safe;
this rule reports the rest, each with its reason:

- a subclass of `DataParallel`: its `scatter`/`gather`/`replicate` overrides
  (uneven batch splits, dict outputs) have no DDP counterpart;
- the functional `torch.nn.parallel.data_parallel(module, inputs, ...)`;
- nested wrappers (`DataParallel(DataParallel(m))`, DDP around DataParallel) and a
  module passed through `*args`;
- DataParallel around a submodule (`model.features = DataParallel(model.features)`):
  NPU510 rewrites it to the single-process wrapper, so one process runs as before,
  but under torchrun DDP must wrap the whole model;
- every `DataParallel(...)` when NPU510 is not selected.

`isinstance(model, nn.DataParallel)` checks, common when unwrapping
`model.module`, are harmless and not reported (NPU510 makes them accept DDP).
"""
    examples = (
        Example("import torch.nn as nn\nclass Balanced(nn.DataParallel):  # reported\n    pass\n"),
        Example("import torch.nn as nn\nout = nn.parallel.data_parallel(model, x)  # reported\n"),
        Example("import torch.nn as nn\nif isinstance(model, nn.DataParallel):\n    model = model.module\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in FUNCTIONAL:
            self.report(
                node,
                "the functional `data_parallel` replicates the module across devices in one process, which NPUs cannot do",
                "call the module directly, and run one process per NPU with the model in "
                "npu_runtime.data_parallel(model)",
            )
            return
        if qualified == "npu_runtime.data_parallel" and call_arg(node, "ddp") is not None:
            # NPU510's output for a submodule (`ddp=False`): reported again on a second run
            decision = plan(self.ctx, node)
            if decision.rewrite and not decision.whole_model:
                self.report(node, decision.reason, WHOLE_MODEL)
            return
        if qualified not in DATA_PARALLEL:
            return
        if REWRITER not in self.ctx.active:
            self.report(node, "`DataParallel` cannot replicate a model across NPUs", SUGGESTION)
            return
        decision = plan(self.ctx, node)
        if not decision.rewrite:
            self.report(node, f"`DataParallel` not rewritten ({decision.reason})", SUGGESTION)
        elif decision.reason is not None:
            self.report(node, decision.reason, WHOLE_MODEL)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            if self.qualified_name(base.value) in DATA_PARALLEL:
                self.report(base, "subclass of `DataParallel`: its replicate/scatter/gather cannot run on NPUs", SUBCLASS_SUGGESTION)
