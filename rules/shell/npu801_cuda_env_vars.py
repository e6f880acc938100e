"""NPU801: CUDA environment variables in shell scripts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npu_migrate.pipeline.rulebase import Example
from npu_migrate.tables.env_vars import is_cuda_variable

from ._env import EnvVarRule

if TYPE_CHECKING:
    from tree_sitter import Node

CUDA_PATH_ADVICE = (
    "CANN's libraries and tools come from `source /usr/local/Ascend/ascend-toolkit/set_env.sh` "
    "(it sets LD_LIBRARY_PATH, PATH and ASCEND_HOME_PATH); drop the CUDA paths"
)


class ShellCudaEnvVars(EnvVarRule):
    id = "NPU801"
    name = "shell-cuda-env-vars"
    summary = "Rename CUDA environment variables in shell scripts to their Ascend counterparts; report the others"
    triggers = (b"CUDA_", b"NVIDIA_", b"CUDNN_", b"FORCE_CUDA", b"/usr/local/cuda")
    what = "CUDA"
    rationale = """
A launcher that sets `CUDA_VISIBLE_DEVICES` selects nothing on Ascend: the
CANN runtime reads `ASCEND_RT_VISIBLE_DEVICES` (same value format, process
level). Renamed wherever the shell treats the name as a variable (see
`rules/shell/_env.py`: assignments, `export`, `env VAR=...` and `VAR=... cmd`
prefixes, `unset`, every expansion form, `mpirun -x`, `docker run -e`), using
the table shared with the Python rules (`npu_migrate/tables/env_vars.py`):

- `CUDA_VISIBLE_DEVICES` -> `ASCEND_RT_VISIBLE_DEVICES`;
- `CUDA_LAUNCH_BLOCKING` -> `ASCEND_LAUNCH_BLOCKING` (1 = synchronous launches);
- `PYTORCH_CUDA_ALLOC_CONF` -> `PYTORCH_NPU_ALLOC_CONF` (same option syntax).

Every other `CUDA_*`, `PYTORCH_CUDA_*`, `TORCH_CUDA_*`, `NVIDIA_*`, `CUDNN_*`
variable (and `FORCE_CUDA`) is reported on its line with what to do instead
(`CUDA_DEVICE_MAX_CONNECTIONS`, `CUDA_HOME`, `NVIDIA_VISIBLE_DEVICES`...), and
so is an assignment whose value points into `/usr/local/cuda`
(`LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH`).
The same words in prose (`echo` text, comments, quoted heredocs) are left alone,
and so is a variable set for a command that runs JAX or TensorFlow code
(`CUDA_VISIBLE_DEVICES=-1 python c51_jax.py`, cleanrl's benchmarks): that framework
reads it on NVIDIA GPUs and has no Ascend counterpart (reported).

A script that runs NVIDIA serving or engine tools (`trtllm-build`, `tritonserver`, `trtexec`,
`perf_analyzer`, `genai-perf`) is an NVIDIA deployment: its CUDA variables are reported, not
renamed (F5-TTS's `runtime/triton_trtllm/run.sh`).
"""
    examples = (
        Example(
            'export CUDA_VISIBLE_DEVICES=0,1,2,3\necho "GPUs: ${CUDA_VISIBLE_DEVICES:-all}"\n',
            'export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3\necho "GPUs: ${ASCEND_RT_VISIBLE_DEVICES:-all}"\n',
        ),
        Example('CUDA_LAUNCH_BLOCKING=1 python train.py\n', 'ASCEND_LAUNCH_BLOCKING=1 python train.py\n'),
        Example('# set CUDA_VISIBLE_DEVICES to pick GPUs\necho "CUDA_VISIBLE_DEVICES is not set"\n'),
    )

    @classmethod
    def concerns(cls, name: str) -> bool:
        return is_cuda_variable(name)

    def visit_variable_assignment(self, node: Node) -> None:
        """``LD_LIBRARY_PATH=/usr/local/cuda/lib64:...``: a setting that points at the CUDA toolkit."""
        value = node.child_by_field_name("value")
        if value is not None and b"/usr/local/cuda" in value.text:
            self.report(value, "this setting points at the CUDA toolkit (/usr/local/cuda)", CUDA_PATH_ADVICE)
