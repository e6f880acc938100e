"""NPU953: Ray Train's ``ScalingConfig(use_gpu=True)`` asks for GPUs."""

from __future__ import annotations

import libcst as cst

from npu_migrate.python.cst_util import call_arg
from npu_migrate.python.rule import Example, Rule

SCALING_CONFIGS = frozenset({"ray.train.ScalingConfig", "ray.air.ScalingConfig", "ray.air.config.ScalingConfig",
                             "ray.train.v2.api.config.ScalingConfig"})
ROUTE = ('on Ascend write `use_gpu=False, resources_per_worker={"NPU": 1}` and give the trainer '
         '`torch_config=TorchConfig(backend="hccl")` (ray 2.60.0: ray/train/torch/config.py registers torch_npu\'s '
         '"hccl" backend; ray/air/_internal/device_manager/npu.py moves the workers\' tensors to the NPU)')


class RayTrainUseGpu(Rule):
    id = "NPU953"
    name = "ray-train-use-gpu"
    impact = "blocking"
    fixable = False
    summary = "Report Ray Train's `ScalingConfig(use_gpu=True)`: one GPU per worker, which an Ascend cluster does not have"
    triggers = (("ScalingConfig", "use_gpu"),)
    rationale = f"""
Ray Train's `ScalingConfig(use_gpu=True)` reserves `{{"GPU": 1}}` per worker (ray 2.60.0,
`ray/air/config.py`, `_resources_per_worker_not_none`) and the torch backend then
defaults to NCCL: on an Ascend cluster the workers never get scheduled. Ray Train
knows Ascend through its NPU device manager and the `"hccl"` backend. Route: {ROUTE}.
Reported, not rewritten: the trainer's `torch_config` is another call, often in
another file.
"""
    examples = (
        Example("from ray.train import ScalingConfig\n\nconfig = ScalingConfig(num_workers=8, use_gpu=True)  # reported\n"),
        Example("from ray.train import ScalingConfig\n\nconfig = ScalingConfig(num_workers=8, use_gpu=False)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualified_name(node.func) not in SCALING_CONFIGS:
            return
        argument = call_arg(node, "use_gpu")
        if argument is None or (isinstance(argument.value, cst.Name) and argument.value.value == "False"):
            return
        self.report(argument, "`ScalingConfig(use_gpu=...)` reserves one GPU per Ray Train worker", ROUTE)
