"""``modelarts.sh``: the boot script of a ModelArts training job.

ModelArts starts the boot command once per node and describes the job in
``MA_NUM_HOSTS`` (nodes), ``VC_TASK_INDEX`` (this node, 0-based), ``VC_WORKER_HOSTS``
(every node, comma-separated; the first is the master) and ``MA_NUM_GPUS``
(accelerators per node). The script maps them onto torchrun. ModelArts places the code
directory under ``${MA_JOB_DIR}``; the boot command in the header assumes the project
directory was uploaded as the code directory (a custom image with the code inside runs
the script from its own path instead).
"""

from __future__ import annotations

import shlex

from .. import shell
from ..artifacts import Artifact
from ..plan import LaunchPlan

FILE = "modelarts.sh"


def boot_command(plan: LaunchPlan) -> str:
    """The boot command; the project directory's name and the path are quoted for the shell."""
    return f'bash "${{MA_JOB_DIR}}"/{shlex.quote(plan.root.name)}/{shlex.quote(plan.out_path(FILE))}'


def render(plan: LaunchPlan) -> list[Artifact]:
    path = plan.out_path(FILE)
    usage = [f"boot command of the training job: {boot_command(plan)}",
             f"(code directory: {plan.root.name}/; with the code in a custom image: bash <its path>/{path})"]
    notes = [
        f"Sized for {plan.nodes} node(s) x {plan.cards} NPU(s); the job's own MA_NUM_HOSTS and MA_NUM_GPUS win.",
        "User variables must not start with MA_ (ModelArts reserves them).",
        "Failures restart in the script by exit class (NPU_MAX_RESTARTS); enable the training job's",
        "automatic restart (fault tolerance) as well, so that a hardware fault (exit 77) moves the job to",
        "other nodes.",
    ]
    text = (
        shell.header(plan, f"Start {plan.entry} in a ModelArts training job, with torchrun on each node.",
                     usage, notes)
        + shell.strict_mode_and_root(plan)
        + "\n# ModelArts describes the job; the defaults only apply outside ModelArts.\n"
        + shell.shape(plan, nnodes=f"${{MA_NUM_HOSTS:-{plan.nodes}}}", nproc=f"${{MA_NUM_GPUS:-{plan.cards}}}",
                      node_rank="${VC_TASK_INDEX:-}")
        + "WORKER_HOSTS=${VC_WORKER_HOSTS:-127.0.0.1}\n"
        + "MASTER_ADDR=${WORKER_HOSTS%%,*}  # the first worker, as the ModelArts guides do\n"
        + shell.default("MASTER_PORT", str(plan.master_port)) + "\n"
        + shell.python_default(plan)
        + "LOG_DIR=${LOG_DIR:-${MA_LOG_DIR:-logs}}\n"
        + "\n" + shell.cann_env()
        + "\n" + shell.hccl_block(plan)
        + "\n" + shell.preflight(plan)
        + "\n"
        + shell.torchrun_exec(plan, "torch.distributed.run")
    )
    return [Artifact(path, text, executable=True)]
