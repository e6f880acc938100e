"""NPU803: ``--backend nccl`` and friends on training command lines."""

from __future__ import annotations

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.tables.backends import hccl_backend, is_backend_key

from ._arguments import ValueRule


class ShellBackendArgument(ValueRule):
    id = "NPU803"
    name = "shell-backend-argument"
    summary = "Rewrite the `nccl` process-group backend passed by launch scripts (`--backend nccl`, `--dist-backend=nccl`) to `hccl`"
    triggers = (b"nccl",)
    kind = "backend"
    rationale = """
Training scripts take their process-group backend from the command line
(`--backend`, `--dist-backend`, `--dist_backend`, `--distributed-backend` in
Megatron-LM, `dist_backend=` Hydra overrides). On Ascend it must be `hccl`;
`nccl` fails at `init_process_group`. The value is rewritten on the command
lines of `python`, `torchrun`, `python -m torch.distributed.launch`,
`deepspeed` and `accelerate launch` (also behind `srun`, `mpirun`, `nohup`...),
in argument arrays and option strings kept in variables, in variables whose
name says they hold a backend (`DIST_BACKEND=nccl`, `${BACKEND:-nccl}`), in a
variable passed as the option's value (`--backend $B` with `B=nccl`; its
default in `--dist-backend ${BK:-nccl}`), and in
comparisons with those variables. Composite specs become
`cpu:gloo,npu:hccl` (the table `npu_migrate/tables/backends.py`, shared with
NPU201). Rendezvous backends (`--rdzv-backend`) and other backends
(`--attention-backend`) are not process-group backends and stay.
"""
    examples = (
        Example(
            "torchrun --nproc_per_node 8 pretrain.py \\\n    --distributed-backend nccl \\\n    --lr 1e-4\n",
            "torchrun --nproc_per_node 8 pretrain.py \\\n    --distributed-backend hccl \\\n    --lr 1e-4\n",
        ),
        Example('BACKEND="nccl"\npython -m torch.distributed.launch main.py --dist-backend=$BACKEND\n',
                'BACKEND="hccl"\npython -m torch.distributed.launch main.py --dist-backend=$BACKEND\n'),
        Example('echo "--backend nccl is not used on Ascend"\ntorchrun --rdzv-backend c10d train.py\n'),
    )

    @classmethod
    def is_key(cls, name: str) -> bool:
        return is_backend_key(name)

    @classmethod
    def new_value(cls, value: str) -> str | None:
        return hccl_backend(value)
