"""NPU953: Ray Train's ``ScalingConfig(use_gpu=True)`` and ``resources_per_worker={"GPU": n}`` ask for GPUs."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg, string_value
from npu_migrate.python.rule import Example, Rule

SCALING_CONFIGS = frozenset({"ray.train.ScalingConfig", "ray.air.ScalingConfig", "ray.air.config.ScalingConfig",
                             "ray.train.v2.api.config.ScalingConfig"})
ROUTE = ('on Ascend write `use_gpu=False, resources_per_worker={"NPU": 1}` and give the trainer '
         '`torch_config=TorchConfig(backend="hccl")` (ray 2.60.0: ray/train/torch/config.py registers torch_npu\'s '
         '"hccl" backend; ray/air/_internal/device_manager/npu.py moves the workers\' tensors to the NPU)')


def _false(argument: cst.Arg | None) -> bool:
    return argument is None or (isinstance(argument.value, cst.Name) and argument.value.value == "False")


class RayTrainUseGpu(Rule):
    id = "NPU953"
    name = "ray-train-use-gpu"
    impact = "blocking"
    fixable = False
    summary = ('Report Ray Train\'s `ScalingConfig(use_gpu=True)` and `resources_per_worker={"GPU": n}`: GPUs per '
               'worker, which an Ascend cluster does not have')
    triggers = (("ScalingConfig", "use_gpu"), ("ScalingConfig", "resources_per_worker"))
    rationale = f"""
Ray Train's `ScalingConfig(use_gpu=True)` reserves `{{"GPU": 1}}` per worker (ray 2.60.0,
`ray/air/config.py`, `_resources_per_worker_not_none`) and the torch backend then
defaults to NCCL: on an Ascend cluster the workers never get scheduled. Ray Train
knows Ascend through its NPU device manager and the `"hccl"` backend. Route: {ROUTE}.

A `"GPU"` key in the `resources_per_worker` dict of the same call (a literal written
there, or the one assignment of the name passed there) is reported too, at the key. Renaming that key alone would not be right, which is why it is not
rewritten (the same ray 2.60.0 sources): `ScalingConfig.__post_init__` raises
`ValueError` for a `"GPU"` entry without `use_gpu=True`; with `use_gpu=True` Ray adds
`"GPU": 1` back (`resources_per_worker.setdefault("GPU", 1)`), so the worker still
waits for a GPU; and with neither, `TorchConfig`'s default backend is chosen from the
`"GPU"` count (`ray/train/torch/config.py`, `on_start`: `nccl` if there are GPUs, else
`gloo`), so NPU tensors would meet gloo. The three changes (`use_gpu=False`, the
`"NPU"` key, the trainer's `torch_config`) go together, and the trainer is another
call, often in another file.
"""
    examples = (
        Example("from ray.train import ScalingConfig\n\nconfig = ScalingConfig(num_workers=8, use_gpu=True)  # reported\n"),
        Example('from ray.train import ScalingConfig\n\nconfig = ScalingConfig(\n    num_workers=8,\n'
                '    use_gpu=True,  # reported\n    resources_per_worker={"GPU": 1, "CPU": 8},  # reported\n)\n'),
        Example("from ray.train import ScalingConfig\n\nconfig = ScalingConfig(num_workers=8, use_gpu=False)\n"),
        Example('from ray.train import ScalingConfig\n\nconfig = ScalingConfig(num_workers=8, resources_per_worker={"CPU": 8})\n'),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) not in SCALING_CONFIGS:
            return
        use_gpu = call_arg(node, "use_gpu")
        if not _false(use_gpu):
            self.report(use_gpu, "`ScalingConfig(use_gpu=...)` reserves one GPU per Ray Train worker", ROUTE)
        resources = call_arg(node, "resources_per_worker")
        literal = self._literal(resources.value) if resources is not None else None
        if literal is None:
            return
        reported = self.ctx.position(use_gpu).start.line if not _false(use_gpu) else None
        for element in literal.elements:
            if not (isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
                    and string_value(element.key) == "GPU"):
                continue
            if isinstance(element.value, (cst.Integer, cst.Float)) and float(element.value.value) == 0:
                continue  # Ray drops zero entries
            if reported is not None and self.ctx.position(element.key).start.line == reported:
                continue  # one finding per line: the `use_gpu` one says it all
            self.report(element.key, '`resources_per_worker={"GPU": ...}` asks Ray Train for GPUs per worker; '
                        'renaming the key alone is not enough (Ray adds "GPU" back while use_gpu=True, and picks '
                        'gloo without it)', ROUTE)

    def _literal(self, value: cst.BaseExpression) -> cst.Dict | None:
        """The dict literal ``resources_per_worker`` is: written in the call, or the value
        of the one assignment of a name in its scope (``resources = {"GPU": 1}``)."""
        if isinstance(value, cst.Dict):
            return value
        if not isinstance(value, cst.Name):
            return None
        found = self.ctx.assignments(value, value.value)
        if not found or len(found) != 1:
            return None
        bound = getattr(next(iter(found)), "node", None)  # builtins have no node
        target = self.ctx.parent(bound) if isinstance(bound, cst.Name) else None
        statement = self.ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(statement.value, cst.Dict):
            return statement.value
        return None
