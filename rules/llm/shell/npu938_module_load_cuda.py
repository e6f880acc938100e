"""NPU938: ``module load cuda/...`` -> the CANN environment (``set_env.sh``), guarded."""

from __future__ import annotations

import re

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
CANN = (f'if [ -f {SET_ENV} ]; then source {SET_ENV}; '
        f'else echo "CANN set_env.sh not found: torch_npu will not import" >&2; fi')
#: Environment-module names of NVIDIA's stack (``cuda/11.8``, ``cudnn/8.9``, ``nccl``, ``cudatoolkit``...).
_NVIDIA = re.compile(r"(cuda|cudnn|nccl|cudatoolkit|cuda-toolkit|nvhpc|tensorrt)([-_/.].*)?", re.IGNORECASE)


class ModuleLoadCuda(ShellRule):
    id = "NPU938"
    name = "module-load-cuda"
    summary = "Replace `module load cuda/...` with sourcing CANN's `set_env.sh` (guarded)"
    triggers = (b"module", b"ml ")
    fixable = True
    rationale = f"""
Cluster scripts (Slurm batch files, `srun` wrappers) set up the GPU toolchain
with environment modules: `module load cuda/11.8 cudnn/8.9`. On an Ascend node
the toolchain is CANN, and nothing runs without its environment: without
`set_env.sh` (which sets `LD_LIBRARY_PATH`, `ASCEND_TOOLKIT_HOME`,
`ASCEND_OPP_PATH`...), `import torch_npu` fails with `libhccl.so: cannot open
shared object file`. A `module load`/`module add`/`ml` line whose modules are
all NVIDIA's (cuda, cudnn, nccl, cudatoolkit, nvhpc, tensorrt) becomes

    {CANN}

({SET_ENV} is CANN's default install path; a site with a CANN module of its
own should load that instead). A line that also loads other modules
(`module load gcc/9 cuda/11.8`) is reported: the CUDA modules go, the rest
stays, and that edit is the user's.
"""
    examples = (
        Example("#!/bin/bash\n#SBATCH -N 1\nmodule load cuda/11.8 cudnn/8.9\nsrun python train.py\n",
                f"#!/bin/bash\n#SBATCH -N 1\n{CANN}\nsrun python train.py\n"),
        Example("module load anaconda3/2023.03\n"),
    )

    def visit_command(self, node) -> None:
        words = syntax.command_args(node)
        if not words:
            return
        program = syntax.program(words[0])
        if program == "module" and len(words) >= 3 and words[1].text in ("load", "add"):
            modules = words[2:]
        elif program == "ml" and len(words) >= 2:
            modules = words[1:]
        else:
            return
        names = [w.text for w in modules if not w.text.startswith("-")]
        nvidia = [n for n in names if _NVIDIA.fullmatch(n.strip("\"'"))]
        if not nvidia:
            return
        if len(nvidia) == len(names) and all(w.static for w in modules):
            self.replace_node(node, CANN, f"`{node.text.decode('utf-8', 'replace')}` -> source CANN's set_env.sh "
                              "(guarded): torch_npu needs the CANN environment")
        else:
            self.report(node, f"`{' '.join(nvidia)}`: NVIDIA's toolchain modules; torch_npu needs the CANN environment",
                        f"drop the CUDA modules and source CANN's environment ({SET_ENV}, or the site's CANN module)")
