"""NPU510: ``nn.DataParallel(model)`` -> ``npu_runtime.data_parallel(model)`` (DDP on HCCL)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.imports import guard_text
from npu_migrate.python.rule import Example

from ._common import DATA_PARALLEL, DDP, ParallelConversion, plan, with_keyword

WHERE = "code made data parallel"


class DataParallelToDdp(ParallelConversion):
    id = "NPU510"
    name = "data-parallel-to-ddp"
    summary = "Rewrite nn.DataParallel into npu_runtime.data_parallel: DDP over HCCL under torchrun, a thin wrapper in one process"
    triggers = ("DataParallel", "data_parallel")  # data_parallel: a file converted by a run before
    rationale = """
Ascend has no `nn.DataParallel`: one process cannot drive several NPUs (its
replicate/scatter call `torch._C._broadcast_coalesced` and `torch._C._scatter`,
which only CUDA builds of torch have, so even a single NPU fails at the first
forward). The Ascend migration guide's step is DistributedDataParallel with
HCCL, one process per NPU, launched by torchrun. This rule does that step so that
the *same* migrated script runs both ways:

- `nn.DataParallel(model, ...)` (any import form) becomes
  `npu_runtime.data_parallel(model, ...)`. Under torchrun with several processes
  it moves the model to the process's own NPU and returns
  `DistributedDataParallel(model, device_ids=[that NPU])`. In one process it
  returns a thin `nn.DataParallel` subclass on the current NPU that keeps
  `.module`, the `module.` prefix of the state-dict keys and
  `isinstance(model, nn.DataParallel)`, and moves inputs to the device as
  DataParallel's scatter did: checkpoints written by the CUDA original load after
  migration, and the other way round. `device_ids`, `output_device` and `dim` are
  kept in the call and not needed (each process drives one NPU, and its loader
  already yields its share of the batch).
- `npu_runtime.init_data_parallel()` goes at the start of the entry point (first
  statement of the `__main__` block; right after the imports of a script whose
  DataParallel is at module level; else the start of the function that builds
  it). It creates the process group (hccl, through `npu_runtime.init_distributed`)
  only when the launcher says there are several processes; one process gets no
  group and keeps its plain sampler.
- **Batch semantics: the global batch is kept.** DataParallel splits each batch
  across its devices, so the script's `batch_size` is the global batch, and its
  learning rate was tuned for it. A shuffled `DataLoader` in the file gets a
  `DistributedSampler` with `set_epoch` exactly as NPU501 adds one, and its
  `batch_size=B` becomes `npu_runtime.per_process_batch_size(B, sampler)`: `B /
  world size` per process (rounded up, with a warning, when it does not divide),
  `B` in one process. The Ascend guide's rule for changing the number of cards
  (scale batch size and learning rate together) is then not needed: nothing
  changes as seen by the optimizer.
- `isinstance(m, nn.DataParallel)` checks (in every file of a project that builds
  a DataParallel) also accept `DistributedDataParallel`, so the usual
  `model.module if isinstance(...) else model` unwrapping keeps working under DDP.
- Device 0 written out (`"cuda:0"`, `.cuda(0)`, `torch.device("cuda", 0)`) means
  "the GPU DataParallel gathers on"; it becomes the current device (`"npu"`,
  `.npu()`), which is each process's own NPU under DDP and NPU 0 in one process.
  `set_device(...)` calls are reported: under torchrun they would move every
  process to the same NPU.

Files that already run one process per device (DDP, `init_process_group`,
DistributedSampler, `mp.spawn`) keep their own distributed path: there
DataParallel is the one-process fallback, and only the call is rewritten.

Not rewritten, reported by NPU913 with the reason: `DataParallel` subclasses
(custom `scatter`/`gather`), the functional `data_parallel(...)`, nested wrappers
(`DataParallel(DataParallel(m))`, DDP around DataParallel) and a module passed
through `*args`. DataParallel around a submodule (`model.features =
DataParallel(model.features)`) is rewritten to the single-process wrapper
(`ddp=False`) and reported: DDP must wrap the whole model.

What stays as it was: every process runs the script's prints and `torch.save`
calls (DDP keeps the replicas identical, so they write the same bytes); guard
them with `if not dist.is_initialized() or dist.get_rank() == 0:` if that
matters. BatchNorm statistics are per process, as they were per GPU under
DataParallel. A model with parameters that get no gradient in some steps needs
`npu_runtime.data_parallel(model, find_unused_parameters=True)`, as with DDP.
"""
    examples = (
        Example(
            "import torch\n"
            "import torch.nn as nn\n"
            "from torch.utils.data import DataLoader\n"
            "\n"
            "def main():\n"
            "    model = nn.DataParallel(Net()).cuda()\n"
            "    loader = DataLoader(train_set, batch_size=256, shuffle=True)\n"
            "    for epoch in range(10):\n"
            "        for x, y in loader:\n"
            "            step(model, x.cuda(), y.cuda())\n"
            "\n"
            "if __name__ == '__main__':\n"
            "    main()\n",
            "import npu_runtime\n"
            "import torch\n"
            "import torch.nn as nn\n"
            "from torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "\n"
            + guard_text() +
            "\n"
            "def main():\n"
            "    model = npu_runtime.data_parallel(Net()).npu()\n"
            "    train_sampler = DistributedSampler(train_set, shuffle=True) if torch.distributed.is_initialized() else None\n"
            "    loader = DataLoader(train_set, batch_size=npu_runtime.per_process_batch_size(256, train_sampler), "
            "shuffle=train_sampler is None, sampler=train_sampler)\n"
            "    for epoch in range(10):\n"
            "        if train_sampler is not None:\n"
            "            train_sampler.set_epoch(epoch)\n"
            "        for x, y in loader:\n"
            "            step(model, x.npu(), y.npu())\n"
            "\n"
            "if __name__ == '__main__':\n"
            "    npu_runtime.init_data_parallel()\n"
            "    main()\n",
            also=("NPU103",),
        ),
        Example("import torch.nn as nn\nif isinstance(model, nn.DataParallel):\n    model = model.module\n"),
    )

    def leave_file(self) -> None:
        rewritten = []
        for call in self.data_parallel:
            decision = plan(self.ctx, call)
            if not decision.rewrite:
                continue
            rewritten.append(call)
            self.replace(
                call.func,
                cst.parse_expression("npu_runtime.data_parallel"),
                "`DataParallel` -> `npu_runtime.data_parallel`: DDP on this process's NPU under torchrun, "
                "a thin wrapper (same `.module` and `module.` keys) in one process",
                anchor=call,
                needs_torch_npu=False,
            )
            if not decision.whole_model:
                self.replace(
                    call,
                    lambda node: with_keyword(node, "ddp", "False"),
                    "a submodule keeps the single-process wrapper (`ddp=False`)",
                    needs_torch_npu=False,
                )
            self.add_import("npu_runtime")
        if self.already_distributed():
            return
        converted = rewritten or self.converted["npu_runtime.data_parallel"]
        if converted:
            self.convert(converted[0], WHERE)
        if converted or self.ctx.facts.constructs_data_parallel:
            for check in self.isinstance_checks:
                self._accept_ddp(check)

    def _accept_ddp(self, check: cst.Call) -> None:
        """``isinstance(m, nn.DataParallel)`` -> ``isinstance(m, (nn.DataParallel, nn.parallel.DistributedDataParallel))``."""
        classes = check.args[1].value
        elements = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
        names = [self.qualified_name(e) for e in elements]
        if not any(n in DATA_PARALLEL for n in names) or any(n in DDP for n in names):
            return
        spelled = self._ddp_spelling(next(e for e, n in zip(elements, names) if n in DATA_PARALLEL))
        if spelled is None:
            return
        ddp = cst.parse_expression(spelled)

        def add(node: cst.Call) -> cst.Call:
            second = node.args[1]
            value = second.value
            if isinstance(value, cst.Tuple):
                *head, last = value.elements
                comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                new = value.with_changes(
                    elements=[*head, last.with_changes(comma=comma), cst.Element(ddp, comma=last.comma)]
                )
            else:
                new = cst.Tuple(
                    [cst.Element(value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Element(ddp)]
                )
            return node.with_changes(args=[node.args[0], second.with_changes(value=new)])

        self.replace(
            check,
            add,
            "the check also accepts DistributedDataParallel, which `npu_runtime.data_parallel` returns under torchrun",
            needs_torch_npu=False,
        )

    def _ddp_spelling(self, data_parallel: cst.BaseExpression) -> str | None:
        """How this file names DistributedDataParallel, next to the given DataParallel spelling."""
        for local, qualified in self.ctx.imports.bindings.items():
            if qualified in DDP:
                return local
        if isinstance(data_parallel, cst.Attribute):
            owner = self.ctx.module.code_for_node(data_parallel.value)
            owner_name = self.qualified_name(data_parallel.value)
            if owner_name == "torch.nn":
                return f"{owner}.parallel.DistributedDataParallel"
            if owner_name == "torch.nn.parallel":
                return f"{owner}.DistributedDataParallel"
        if "DistributedDataParallel" in self.ctx.text:
            return None  # the name means something else here
        self.add_import("torch.nn.parallel", "DistributedDataParallel")
        return "DistributedDataParallel"

