"""NPU511 (opt-in): make a single-device training script data parallel (DDP over HCCL)."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.imports import guard_text
from npu_migrate.python.rule import Example

from ._common import ParallelConversion, runtime_name_taken

WHERE = "a script made data parallel"
_OPTIMIZER_ROOT = "torch.optim."
_NOT_OPTIMIZERS = ("lr_scheduler", "swa_utils", "Optimizer")


class SingleDeviceToDdp(ParallelConversion):
    id = "NPU511"
    name = "single-device-to-ddp"
    summary = "Make a single-device training script data parallel: DDP over HCCL under torchrun, unchanged as one process"
    opt_in = True
    triggers = (("backward", "optim"),)
    rationale = """
Opt-in (`npu-migrate --extend-select NPU511 src/`, or `extend-select = ["NPU511"]`
under `[tool.npu-migrate]`): it changes how a program runs, not only which device
it uses, so neither `ALL` nor a prefix turns it on.

A training script written for one GPU becomes one that also trains on several
NPUs, one process each, launched by torchrun, by the steps of the Ascend guide
(process group on HCCL, DDP on the process's own NPU, DistributedSampler with
`set_epoch`), written so that `python train.py` still runs exactly as before:

- `npu_runtime.init_data_parallel()` at the start of the entry point: the process
  group (hccl, this process's NPU as current device) when the launcher says there
  are several processes, nothing in one process;
- `model = npu_runtime.distribute_model(model)` right before the statement that
  builds the optimizer over `model.parameters()` (the model is recognised by
  that call). Under torchrun it returns DDP on this process's NPU, whose
  `state_dict()`/`load_state_dict()` are the model's own (no `module.` prefix)
  and which passes unknown attributes on to the model, so checkpoints and
  `model.fc`-style code are unchanged; in one process it returns the model itself;
- shuffled DataLoaders get a DistributedSampler with `set_epoch` (as NPU501 adds
  them) and `batch_size=npu_runtime.per_process_batch_size(B, sampler)`: **the
  global batch stays B**, so the learning rate tuned for one device still fits and
  N processes train what one process trained, N times faster. (The Ascend guide's
  alternative, a fixed per-device batch with the learning rate scaled together
  with it, changes the optimisation; do that by hand if you want it.)
- device 0 written out (`"cuda:0"`, `.cuda(0)`) becomes the current device, which
  is each process's own NPU under torchrun; `set_device(...)` calls are reported.

Left alone: files that are already distributed (DDP, `init_process_group`,
DistributedSampler, `mp.spawn`, or this rule's own output, which makes it
idempotent), files with `nn.DataParallel` (NPU510 converts those), and files
without a training step (`.backward()` and a `torch.optim` optimizer). A
training script whose optimizer is not built over `<name>.parameters()` of a
model bound in the same function is reported.

Every process runs the script's prints, evaluation and `torch.save` calls (the
replicas are identical, so they write the same bytes); evaluation loaders
(`shuffle=False`) are not sharded, so every process computes the single-process
metrics.
"""
    examples = (
        Example(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "\n"
            "def main():\n"
            "    model = Net().cuda()\n"
            "    loader = DataLoader(train_set, batch_size=64, shuffle=True)\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for epoch in range(10):\n"
            "        for x, y in loader:\n"
            "            loss = loss_fn(model(x.cuda()), y.cuda())\n"
            "            optimizer.zero_grad()\n"
            "            loss.backward()\n"
            "            optimizer.step()\n"
            "\n"
            "if __name__ == '__main__':\n"
            "    main()\n",
            "import npu_runtime\n"
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "\n"
            + guard_text() +
            "\n"
            "def main():\n"
            "    model = Net().npu()\n"
            "    train_sampler = DistributedSampler(train_set, shuffle=True) if torch.distributed.is_initialized() else None\n"
            "    loader = DataLoader(train_set, batch_size=npu_runtime.per_process_batch_size(64, train_sampler), "
            "shuffle=train_sampler is None, sampler=train_sampler)\n"
            "    model = npu_runtime.distribute_model(model)\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for epoch in range(10):\n"
            "        if train_sampler is not None:\n"
            "            train_sampler.set_epoch(epoch)\n"
            "        for x, y in loader:\n"
            "            loss = loss_fn(model(x.npu()), y.npu())\n"
            "            optimizer.zero_grad()\n"
            "            loss.backward()\n"
            "            optimizer.step()\n"
            "\n"
            "if __name__ == '__main__':\n"
            "    npu_runtime.init_data_parallel()\n"
            "    main()\n",
            also=("NPU103",),
        ),
        Example(
            "import torch\n"
            "import torch.distributed as dist\n"
            "dist.init_process_group('nccl')\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "loss.backward()\n"
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.optimizers: list[cst.Call] = []
        self.backwards: list[cst.Call] = []

    def visit_call(self, node: cst.Call, qualified: str | None) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            self.backwards.append(node)
        elif qualified is not None and qualified.startswith(_OPTIMIZER_ROOT):
            rest = qualified[len(_OPTIMIZER_ROOT):]
            if rest[:1].isupper() and "." not in rest and rest not in _NOT_OPTIMIZERS:
                self.optimizers.append(node)

    def leave_file(self) -> None:
        if self.already_distributed() or self.data_parallel or self.converted["npu_runtime.data_parallel"]:
            return
        if self.converted["npu_runtime.distribute_model"]:  # converted by a previous run
            # the anchor of the first run, so that findings stay where they were
            anchor = self.optimizers[0] if self.optimizers else self.converted["npu_runtime.distribute_model"][0]
            self.convert(anchor, WHERE)
            return
        if not self.backwards or not self.optimizers:
            return
        if runtime_name_taken(self.ctx):
            self.report(self.optimizers[0], "not made data parallel: the name `npu_runtime` is bound to something "
                        "else in this file", "rename it, then run NPU511 again")
            return
        wraps: dict[str, tuple[cst.CSTNode, cst.Call]] = {}
        for optimizer in self.optimizers:
            found = self._model_of(optimizer)
            if found is not None and found[1] not in wraps:
                wraps[found[1]] = (found[0], optimizer)
        if not wraps:
            self.report(
                self.optimizers[0],
                "not made data parallel: no optimizer built over `<model>.parameters()` of a model bound in "
                "the same function",
                "add `model = npu_runtime.distribute_model(model)` after the model is on its device, and "
                "`npu_runtime.init_data_parallel()` at the start of the program",
            )
            return
        self.add_import("npu_runtime")
        self.convert(self.optimizers[0], WHERE)  # first: the group is joined before the model is wrapped
        for model, (statement, optimizer) in wraps.items():
            self.insert_before(
                statement,
                [cst.parse_statement(f"{model} = npu_runtime.distribute_model({model})\n",
                                     config=self.ctx.module.config_for_parsing)],
                f"`{model}` in DDP on this process's NPU under torchrun (its own state-dict keys); "
                "unchanged in one process",
                anchor=optimizer,
            )

    def _model_of(self, optimizer: cst.Call) -> tuple[cst.CSTNode, str] | None:
        """(the statement of the optimizer's function body to insert before, the model's name)."""
        params = optimizer.args[0].value if optimizer.args and not optimizer.args[0].star else None
        if params is None:
            return None
        model = _parameters_owner(params)
        if model is None:
            return None
        scope = self.ctx.local_scope(optimizer)  # its own bindings: the same as the whole module's
        if scope is None or model not in scope.assignments:
            return None  # a global read inside a function: rebinding it there would make it local
        statement = self.ctx.enclosing_statement(optimizer)
        for ancestor in self.ctx.ancestors(optimizer):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Module)):
                break
            if isinstance(ancestor, cst.BaseStatement):
                statement = ancestor
        if isinstance(statement, cst.ClassDef):
            return None
        return statement, model


def _parameters_owner(node: cst.CSTNode) -> str | None:
    """``model`` for ``model.parameters()`` / ``model.fc.named_parameters()`` anywhere in ``node``."""
    found: list[str] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
                root = func.value
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(root, cst.Name) and root.value != "self":
                    found.append(root.value)
            return not found

    node.visit(_Find())
    return found[0] if found else None
