"""One module per launch target; each renders a plan into artifacts."""

from __future__ import annotations

from ..artifacts import Artifact
from ..plan import LaunchPlan
from . import ascendjob, modelarts, ranktable, torchrun, volcano

RENDERERS = {
    "torchrun": torchrun.render_torchrun,
    "torch-npu-run": torchrun.render_torch_npu_run,
    "ranktable": ranktable.render,
    "modelarts": modelarts.render,
    "volcano": volcano.render,
    "ascendjob": ascendjob.render,
}


def render(plan: LaunchPlan) -> list[Artifact]:
    """Every artifact of the plan's targets, in target order."""
    return [artifact for target in plan.targets for artifact in RENDERERS[target](plan)]
