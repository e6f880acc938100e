"""``torchrun.sh`` and ``torch_npu_run.sh``: one command per node, a process per card.

Both call the launcher as a module of ``$PYTHON`` (``python -m torch.distributed.run`` is
what the ``torchrun`` command runs; ``python -m torch_npu.distributed.run`` is
``torch_npu_run``), so the launcher and the training processes always come from the
same environment. ``torch_npu_run`` is torch_npu's variant for large clusters: the same
flags, with its parallel rendezvous (faster link setup across many nodes).
"""

from __future__ import annotations

from .. import shell
from ..artifacts import Artifact
from ..plan import LaunchPlan

TORCHRUN_FILE = "torchrun.sh"
TORCH_NPU_RUN_FILE = "torch_npu_run.sh"


def render_torchrun(plan: LaunchPlan) -> list[Artifact]:
    return [_render(plan, TORCHRUN_FILE, "torch.distributed.run", "torchrun")]


def render_torch_npu_run(plan: LaunchPlan) -> list[Artifact]:
    return [_render(plan, TORCH_NPU_RUN_FILE, "torch_npu.distributed.run", "torch_npu_run")]


def _render(plan: LaunchPlan, name: str, module: str, command: str) -> Artifact:
    path = plan.out_path(name)
    shape = f"{plan.nodes} node(s) x {plan.cards} NPU(s)"
    if plan.multi_node:
        usage = [f"NODE_RANK=0 MASTER_ADDR=<address of node 0> bash {path}   # on node 0"]
        usage += [f"NODE_RANK={i} MASTER_ADDR=<address of node 0> bash {path}   # on node {i}"
                  for i in range(1, min(plan.nodes, 3))]
        if plan.nodes > 3:
            usage.append(f"... up to NODE_RANK={plan.nodes - 1}")
        master = "MASTER_ADDR=${MASTER_ADDR:?set MASTER_ADDR to the address of node 0, the same on every node}"
    else:
        usage = [f"bash {path} [extra arguments for {plan.entry}]"]
        master = shell.default("MASTER_ADDR", "127.0.0.1")
    notes = [
        "Environment (each overrides the default below): NNODES, NPROC_PER_NODE, NODE_RANK,",
        "MASTER_ADDR, MASTER_PORT, PYTHON, LOG_DIR, the HCCL_* variables, NPU_MAX_RESTARTS;",
        "NPU_PREFLIGHT=0 skips the node check.",
        f"Extra arguments are passed to {plan.entry}.",
    ]
    text = (
        shell.header(plan, f"Start {plan.entry} with {command} on {shape}.", usage, notes)
        + shell.strict_mode_and_root(plan)
        + "\n# The job's shape; NODE_RANK differs per node (required with more than one node).\n"
        + shell.shape(plan)
        + master + "\n"
        + shell.default("MASTER_PORT", str(plan.master_port)) + "\n"
        + shell.python_default(plan)
        + shell.default("LOG_DIR", "logs") + "\n"
        + "\n" + shell.cann_env()
        + "\n" + shell.hccl_block(plan)
        + "\n" + shell.preflight(plan)
        + f"\n# {command}, started as a module of $PYTHON.\n"
        + shell.torchrun_exec(plan, module)
    )
    return Artifact(path, text, executable=True)
