"""npu_runtime: keep a migrated training script running on Ascend clusters.

Standard library and torch only; torch_npu is used when importable. Importing this
package does not import torch (every submodule imports it lazily).
"""

from __future__ import annotations

#: The release; runtime/pyproject.toml reads it, and npu-migrate pins migrated repositories
#: to it (`npu-runtime==<this>`) when it adds `import npu_runtime`.
__version__ = "0.1.0"

from . import children as _children
from .checkpoint import CheckpointManager, ResumePoint, SaveHandle, resume_batches
from .distributed import DistInfo, init_distributed
from .errors import CheckpointError, LaunchError, RanktableError
from .health import phase
from .install import install
from .install import install_in_worker as _install_in_worker
from .parallel import (
    data_parallel,
    distribute_model,
    init_data_parallel,
    is_main_process,
    per_process_batch_size,
)
from .watchdog import EXIT_CODE as WATCHDOG_EXIT_CODE
from .watchdog import Watchdog, beat

__all__ = [
    "WATCHDOG_EXIT_CODE",
    "CheckpointError",
    "CheckpointManager",
    "DistInfo",
    "LaunchError",
    "RanktableError",
    "ResumePoint",
    "SaveHandle",
    "Watchdog",
    "beat",
    "init_distributed",
    "data_parallel",
    "distribute_model",
    "init_data_parallel",
    "install",
    "is_main_process",
    "per_process_batch_size",
    "phase",
    "resume_batches",
]

# A worker process of an installed parent (spawn/forkserver start methods) imports this
# package before it bootstraps: arm the hook that installs the runtime in it.
_children.register_if_marked(_install_in_worker)
