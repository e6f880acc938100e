"""NPU960: Lightning's ``Fabric``/``Trainer`` with ``accelerator="auto"|"gpu"|"cuda"``: no NPU accelerator."""

from __future__ import annotations

import re

import libcst as cst

from npu_migrate.python import reaches_torch
from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule

ENTRY_POINTS = frozenset({
    "lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric", "lightning.fabric.fabric.Fabric",
    "lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer", "lightning.pytorch.trainer.Trainer",
    "pytorch_lightning.trainer.Trainer", "pytorch_lightning.trainer.trainer.Trainer",
})
#: accelerator values that never select an Ascend device (lightning 2.6.6, fabric/connector.py)
CUDA_OR_AUTO = {"auto": "picks TPU, MPS or CUDA, else the CPU: on Ascend it trains on the CPU without a word",
                "gpu": "means MPS or CUDA: on Ascend it raises `No supported gpu backend found!`",
                "cuda": "is CUDA only"}
ROUTE = ("Lightning (2.6.6 checked) has no NPU accelerator: pass an instance of your own "
         "`lightning.fabric.accelerators.Accelerator` subclass for torch_npu (its `setup_device` calls "
         "torch.npu.set_device, `get_parallel_devices` returns torch.device(\"npu\", i)) with a strategy on the "
         "\"hccl\" backend, e.g. `Trainer(accelerator=NPUAccelerator(), strategy=DDPStrategy("
         "process_group_backend=\"hccl\"))`, or use a Lightning build that registers an NPU accelerator")


#: modules whose import says a ``<cfg>.trainer.accelerator`` is a Lightning trainer's config
CONFIG_MODULES = ("lightning", "pytorch_lightning", "lightning_fabric", "hydra", "omegaconf")


def _key(node: cst.BaseExpression) -> tuple[str | None, cst.BaseExpression | None]:
    """``(key, owner)`` of ``owner.key`` or ``owner["key"]``; ``(None, None)`` otherwise."""
    if isinstance(node, cst.Attribute):
        return node.attr.value, node.value
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return string_value(node.slice[0].slice.value), node.value
    return None, None


#: a name that holds a Lightning trainer's arguments (generative-models' ``trainer_config``)
_TRAINER_NAME = re.compile(r"(?:\w+_)?trainer_(?:config|cfg|conf|kwargs|args|opts?|params)")


def _branches(node: cst.IfExp) -> list[cst.BaseExpression]:
    """The values a conditional expression can take, nested ones included."""
    values = []
    for branch in (node.body, node.orelse):
        values.extend(_branches(branch) if isinstance(branch, cst.IfExp) else [branch])
    return values


def _trainer_name(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and _TRAINER_NAME.fullmatch(node.value) is not None


class LightningAccelerator(Rule):
    id = "NPU960"
    impact = "blocking"
    name = "lightning-accelerator"
    fixable = False
    summary = ('Report Lightning `Fabric`/`Trainer` left on `accelerator="auto"` (the default), `"gpu"` or `"cuda"`, '
               'and `cfg.trainer.accelerator = "gpu"` set in Python')
    triggers = ("Trainer", "Fabric", ("trainer", "accelerator"))
    local_names = tuple(sorted(ENTRY_POINTS))
    #: the config assignment, and the literals a caller passes to a helper that builds the
    #: Fabric (the caller may not mention Lightning at all)
    local_triggers = (re.compile(r"""trainer(?:\.|['"]\]\s*\[\s*['"])accelerator"""),
                      re.compile(r"""(?<=['"])(?:cuda|gpu|auto)(?=['"])"""))
    rationale = f"""
Lightning chooses its device from `accelerator=`: lightning 2.6.6
(`lightning/fabric/connector.py`, `_choose_auto_accelerator`) maps `"auto"` (the
default) to TPU, MPS or CUDA and otherwise to the CPU, `"gpu"` to MPS or CUDA (else
`RuntimeError: No supported gpu backend found!`), and ships accelerators for CPU,
CUDA, MPS and XLA only (`lightning/fabric/accelerators/`). On Ascend a script that
trained on GPUs therefore trains on the CPU, silently, or fails. Each `Fabric(...)`
/ `Trainer(...)` (`lightning`, `lightning.fabric`, `lightning.pytorch`,
`pytorch_lightning`) whose `accelerator` is absent or one of those strings is
reported, and so is each such string a conditional expression passed as
`accelerator=` can give (`"gpu" if torch.cuda.is_available() else "cpu"`, GPT-SoVITS).
Route: {ROUTE}. A name passed as `accelerator=` is followed to the
string literals assigned to it in its scope (`accelerator = "cuda"` after `if
torch.cuda.is_available():`, as litgpt's API does) and, when it is a parameter
nothing reassigns, to its default and to the literals the file's own calls pass
for it (`_test_model_1device("cuda")` calling `def _test_model_1device(accelerator):
fabric = Fabric(accelerator=accelerator)`, litgpt's tests; the call is matched to
the parameter by the shared "reaches torch" analysis, `parameter_of`, as it follows a
device into a function of the file); each of those values is reported where it is
written. Other values (an object, a call) are left alone.

While a file's Fabric/Trainer is reported here, its device code (the CUDA queries that
pick Lightning's precision, tests of `fabric.device.type`, `torch.cuda.X` calls) runs
where Lightning puts it, which on Ascend is the CPU: it is left unchanged and reported
once (held-out round 16: lit-llama's scripts named an NPU Lightning never reports and
moved a CPU run to bf16). Once the Fabric/Trainer gets an NPU accelerator, this rule is
quiet and a second run migrates that code. `map_location="cpu"` and the other edits that
hold on any device stay.

The same value set in Python on a Hydra/OmegaConf trainer config
(`cfg.trainer.accelerator = "gpu"`, `cfg["trainer"]["accelerator"] = "gpu"`, as
lightning-hydra-template's tests do before `train(cfg)` builds the `Trainer` from it),
or on a name that says it holds the trainer's arguments (`trainer_config["accelerator"]
= "gpu"`, as Stability-AI's generative-models does before `Trainer(**trainer_opt)`;
`trainer_cfg`, `trainer_kwargs`, `trainer_args`...) is reported where it is assigned, in files that import lightning, pytorch_lightning,
hydra or omegaconf (the YAML form is NPU970). Nothing is rewritten: `"cpu"` would
run, but not on the NPU.
"""
    examples = (
        Example('import lightning as L\n\nfabric = L.Fabric(accelerator="cuda", devices=8)  # reported\n'),
        Example("import lightning as L\n\nfabric = L.Fabric(accelerator=NPUAccelerator(), devices=8)\n"),
        Example('import torch\nfrom pytorch_lightning import Trainer\n\n'
                'trainer = Trainer(accelerator="gpu" if torch.cuda.is_available() else "cpu")  # reported\n'),
        Example('from omegaconf import open_dict\n\nwith open_dict(cfg):\n    cfg.trainer.accelerator = "gpu"  # reported\n'),
        Example('from omegaconf import open_dict\n\nwith open_dict(cfg):\n    cfg.trainer.accelerator = "cpu"\n'),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._seen: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualified_name(node.func)
        if qualified not in ENTRY_POINTS:
            return
        short = qualified.rsplit(".", 1)[1]
        argument = call_arg(node, "accelerator")
        if argument is None:
            if any(a.star for a in node.args):
                return  # **kwargs may carry it
            self.report(node, f'`{short}(...)` without `accelerator=` uses "auto", which {CUDA_OR_AUTO["auto"]}', ROUTE)
            return
        value = string_value(argument.value)
        if value in CUDA_OR_AUTO:
            self.report(argument, f'`{short}(accelerator="{value}")` {CUDA_OR_AUTO[value]}', ROUTE)
        elif isinstance(argument.value, cst.Name):
            self._through(argument.value, short)
        elif isinstance(argument.value, cst.IfExp):
            # `accelerator="gpu" if torch.cuda.is_available() else "cpu"` (GPT-SoVITS's s1
            # trainer, held-out round 25): each branch's value is the accelerator's
            for literal in _branches(argument.value):
                self._literal(literal, f"`{short}(accelerator=...)` by a conditional expression")

    def _through(self, name: cst.Name, short: str) -> None:
        """``accelerator = "cuda"`` (or a parameter default) of the name passed as ``accelerator=``."""
        found = self.ctx.assignments(name, name.value)
        if not found:
            return
        for assignment in found:
            bound = getattr(assignment, "node", None)  # builtins have no node
            parent = bound if isinstance(bound, cst.Param) else self.ctx.parent(bound) if isinstance(bound, cst.Name) else None
            holder = self.ctx.parent(parent) if isinstance(parent, cst.AssignTarget) else None
            if isinstance(holder, cst.Assign) and len(holder.targets) == 1:
                literal = holder.value
            elif isinstance(parent, cst.Param) and parent.default is not None and len(found) == 1:
                literal = parent.default  # the default reaches the call only when nothing reassigns it
            else:
                continue
            self._literal(literal, f"`{short}(accelerator={name.value})`")
        if len(found) == 1:
            bound = getattr(next(iter(found)), "node", None)
            parent = self.ctx.parent(bound) if isinstance(bound, cst.Name) else bound
            if isinstance(parent, cst.Param):
                self._callers(parent, short, name.value)

    def _literal(self, literal: cst.BaseExpression, where: str) -> None:
        value = string_value(literal)
        if value in CUDA_OR_AUTO and id(literal) not in self._seen:
            self._seen.add(id(literal))
            self.report(literal, f'`"{value}"` is passed as {where}: it {CUDA_OR_AUTO[value]}', ROUTE)

    def _callers(self, param: cst.Param, short: str, name: str) -> None:
        """The literals this file's calls of a module-level function pass for ``param``."""
        function = next((a for a in self.ctx.ancestors(param) if isinstance(a, cst.FunctionDef)), None)
        if function is None or not any(s is function for s in self.ctx.module.body):
            return
        analysis = reaches_torch.analysis(self.ctx)
        function_name = function.name.value

        class _Calls(cst.CSTVisitor):
            def __init__(self) -> None:
                self.found: list[cst.Arg] = []

            def visit_Call(self, call: cst.Call) -> None:
                if isinstance(call.func, cst.Name) and call.func.value == function_name:
                    self.found.extend(a for a in call.args if analysis.parameter_of(call, a) is param)

        calls = _Calls()
        self.ctx.module.visit(calls)
        for arg in calls.found:
            self._literal(arg.value, f"`{function_name}({name}=...)`, which passes it as `{short}(accelerator={name})`")

    def visit_Assign(self, node: cst.Assign) -> None:
        value = string_value(node.value)
        if value not in CUDA_OR_AUTO:
            return
        for target in node.targets:
            key, owner = _key(target.target)
            if key != "accelerator" or not (_key(owner)[0] == "trainer" or _trainer_name(owner)):
                continue
            if not any(v == m or v.startswith(m + ".") for v in self.ctx.imports.bindings.values() for m in CONFIG_MODULES):
                return
            self.report(node.value, f'a Lightning trainer config set to `accelerator="{value}"`, which '
                        f"{CUDA_OR_AUTO[value]}", ROUTE)
