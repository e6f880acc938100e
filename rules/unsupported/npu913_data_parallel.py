"""NPU913: nn.DataParallel."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.rule import Example, Rule

DATA_PARALLEL = (
    "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel",
)
FUNCTIONAL = ("torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel")
SUGGESTION = (
    "use DistributedDataParallel, one process per NPU: launch with torchrun --nproc_per_node=<NPUs>, "
    'torch.distributed.init_process_group("hccl"), torch.npu.set_device(local_rank), '
    "model = torch.nn.parallel.DistributedDataParallel(model.to(f\"npu:{local_rank}\"), device_ids=[local_rank]) "
    "and a DistributedSampler; on a single NPU simply drop the wrapper"
)


class DataParallel(Rule):
    id = "NPU913"
    name = "data-parallel"
    summary = "Report nn.DataParallel: it cannot replicate across NPUs; use DistributedDataParallel with HCCL"
    fixable = False
    triggers = ("DataParallel", "data_parallel")
    rationale = """
`torch.nn.DataParallel` finds the NPU (torch 2.13 asks the PrivateUse1 backend when
CUDA is absent), and with a single visible NPU its forward simply calls the
wrapped module. With two or more NPUs it replicates the module with
`torch.nn.parallel.comm.broadcast_coalesced`, which calls
`torch._C._broadcast_coalesced`, a binding only CUDA builds of torch define;
torch_npu 2.13 does not patch it, so multi-NPU DataParallel fails at the first
forward. The Ascend way is DistributedDataParallel with the HCCL backend, one
process per NPU. The change touches the launcher, the sampler and the logging
(rank 0 only), so it is reported, never rewritten.

Reported: constructing `DataParallel` (any import form, also as a base class)
and the functional `data_parallel(...)`. `isinstance(model, nn.DataParallel)`
checks, common when unwrapping `model.module`, are harmless and left alone.
"""
    examples = (
        Example("import torch.nn as nn\nmodel = nn.DataParallel(model)  # reported\n"),
        Example("import torch.nn as nn\nif isinstance(model, nn.DataParallel):\n    model = model.module\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified in DATA_PARALLEL:
            self.report(node, "`DataParallel` cannot replicate a model across NPUs", SUGGESTION)
        elif qualified in FUNCTIONAL:
            self.report(node, "`data_parallel` cannot replicate a model across NPUs", SUGGESTION)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            if self.qualified_name(base.value) in DATA_PARALLEL:
                self.report(base, "subclass of `DataParallel`, which cannot replicate a model across NPUs", SUGGESTION)
