"""Data parallelism for migrated scripts: what ``nn.DataParallel`` becomes on Ascend.

Ascend cannot run ``nn.DataParallel`` (one process driving several devices); the
Ascend way is DistributedDataParallel over HCCL, one process per NPU. npu-migrate
rewrites ``nn.DataParallel(model)`` into :func:`data_parallel` (rule NPU510) and,
on request, makes single-device scripts data parallel with :func:`distribute_model`
(rule NPU511). The same migrated script then runs

* as one process (``python train.py``, ``torchrun --nproc_per_node=1``): no process
  group; the model is in a thin wrapper that keeps ``.module`` and the ``module.``
  prefix of its state-dict keys (:func:`data_parallel`), or unwrapped
  (:func:`distribute_model`), so checkpoints move between the CUDA original and the
  migrated script in both directions;
* as one of several processes (torchrun, per-card ranktable, ModelArts, Ascend
  Operator): :func:`init_data_parallel` creates the process group through
  :func:`npu_runtime.init_distributed` (hccl, this process's own NPU), and the
  model is wrapped in DistributedDataParallel on that NPU.

Batch semantics: DataParallel splits one batch across its devices, so a script's
``batch_size`` is the *global* batch. Loaders that get a DistributedSampler also
get :func:`per_process_batch_size`, which divides it by the world size: the global
batch, and with it the learning rate the script was tuned for, stay the same.

Importing this module does not import torch.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import MutableMapping
from typing import Any

from . import devices
from . import env as _env

log = logging.getLogger("npu_runtime")


def _launched_world(environ: MutableMapping[str, str]) -> int:
    """World size the launcher's variables describe (1 for a plain process). A node-level
    launcher that does not say which device this process drives counts as one process."""
    if _env.detect_source(environ) == _env.SINGLE:
        return 1
    from .distributed import default_host_ids

    spec = _env.resolve(environ, host_ids=default_host_ids(environ),
                        ranktable_timeout_s=float(environ.get("NPU_RUNTIME_RANKTABLE_TIMEOUT", "300")))
    if spec.world_size > 1 and not spec.resolved:
        log.warning("npu_runtime: the %s environment describes %d processes but not which device this one "
                    "drives; running as a single process (launch with torchrun for data parallelism)",
                    spec.source, spec.world_size)
        return 1
    return spec.world_size


def init_data_parallel(*, environ: MutableMapping[str, str] | None = None) -> Any:
    """Join the job's process group when this process is one of several; otherwise do nothing.

    Launched as one of several processes (the launcher's variables say world size > 1),
    this calls :func:`npu_runtime.init_distributed` (backend hccl on Ascend, this
    process's own NPU set as the current device) unless a group already exists, and
    returns its :class:`~npu_runtime.DistInfo`. A single process (no launcher, or a
    world of one) gets ``None`` and no process group, so it keeps its plain sampler and
    checkpoints exactly as before. Idempotent; cheap after the first call.
    """
    from .distributed import init_distributed

    devices.import_torch_npu()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return init_distributed() if dist.get_world_size() > 1 else None
    environ = os.environ if environ is None else environ
    if _launched_world(environ) <= 1:
        return None
    return init_distributed(environ=environ)


def data_parallel(module: Any, device_ids: Any = None, output_device: Any = None, dim: int = 0, *,
                  ddp: bool = True, **ddp_kwargs: Any) -> Any:
    """What ``torch.nn.DataParallel(module, device_ids, output_device, dim)`` becomes.

    * One of several processes: ``module`` is moved to this process's NPU and wrapped in
      ``DistributedDataParallel(module, device_ids=[that NPU])`` (the process group is
      created first if needed). ``ddp_kwargs`` (``find_unused_parameters=True``...) go to
      DDP.
    * A single process: a :class:`SingleProcessDataParallel`, a thin ``nn.DataParallel``
      subclass on the current NPU: ``.module``, ``module.``-prefixed state-dict keys and
      ``isinstance(model, nn.DataParallel)`` behave as before, and inputs are moved to the
      module's device as DataParallel's scatter did.

    * A module with no parameter that requires a gradient (inference) gets the thin wrapper
      on this process's NPU in a job of several processes too: there is nothing to
      synchronise, and DDP refuses such a module.

    ``device_ids``, ``output_device`` and ``dim`` are accepted and not used: each process
    drives exactly one NPU, and its loader already yields this process's share of the
    batch. ``ddp=False`` keeps the single-process wrapper even in a job of several
    processes (for a submodule: DDP must wrap the whole model), with a warning, since the
    replicas are then not synchronised.
    """
    from . import _parallel_modules as mods

    info = init_data_parallel() if ddp else None
    if info is None:
        if not ddp and _world_now() > 1:
            log.warning("npu_runtime.data_parallel(ddp=False) in a job of %d processes: the wrapped module is "
                        "not synchronised across processes; wrap the whole model instead", _world_now())
        return mods.SingleProcessDataParallel(module, dim=dim)
    if not any(p.requires_grad for p in module.parameters()):
        # nothing to synchronise (inference: MedicalGPT's multi-GPU demo wraps a frozen PEFT
        # model and unwraps `.module` at once), and DDP raises for a module without a
        # trainable parameter: the thin wrapper on this process's NPU does the same job
        log.info("npu_runtime.data_parallel: the module has no parameter that requires a gradient; "
                 "wrapped for this process's %s without DistributedDataParallel", info.device)
        module.to(info.device)
        return mods.SingleProcessDataParallel(module, dim=dim)
    return mods.wrap_ddp(None, module, info.device, ddp_kwargs)


def distribute_model(module: Any, **ddp_kwargs: Any) -> Any:
    """Make a single-device model data parallel when the job has several processes.

    One of several processes: a :class:`TransparentDDP` on this process's device (the
    group is created first if needed); its ``state_dict()``/``load_state_dict()`` use the
    model's own keys (no ``module.`` prefix, and a prefixed checkpoint loads too) and
    attributes it lacks are looked up on the model, so the rest of the script, and its
    checkpoints, stay as they were. A single process: ``module`` itself, unchanged.
    """
    from . import _parallel_modules as mods

    info = init_data_parallel()
    if info is None:
        return module
    return mods.wrap_ddp(mods.TransparentDDP, module, info.device, ddp_kwargs)


def per_process_batch_size(batch_size: int, sampler: Any) -> int:
    """The batch one process loads so that the job's global batch stays ``batch_size``.

    With a ``DistributedSampler`` over ``n`` replicas this is ``batch_size / n``; with
    anything else (``None`` in a single process) ``batch_size`` unchanged. When ``n``
    does not divide ``batch_size`` the result is rounded up (every process gets at
    least one sample) and a warning names the global batch that results.
    """
    replicas = getattr(sampler, "num_replicas", None)
    if not isinstance(replicas, int) or replicas <= 1 or not _is_distributed_sampler(sampler):
        return batch_size
    per_process = max(1, math.ceil(batch_size / replicas))
    if per_process * replicas != batch_size:
        log.warning("npu_runtime: batch size %d is not divisible by %d processes; each loads %d, a global "
                    "batch of %d", batch_size, replicas, per_process, per_process * replicas)
    return per_process


def is_main_process() -> bool:
    """True in a single process and on rank 0 of a job: the process that writes files.

    NPU510/NPU511 put ``torch.save``, ``os.makedirs``, ``shutil.copyfile``... of a script
    made data parallel under ``if npu_runtime.is_main_process():``, so that, as with
    DataParallel, one process writes each checkpoint (the ranks' copies would race, and
    differ in the device their tensors were saved from).
    """
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def _is_distributed_sampler(sampler: Any) -> bool:
    from torch.utils.data.distributed import DistributedSampler

    return isinstance(sampler, DistributedSampler)


def _world_now() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    try:
        return _launched_world(os.environ)
    except ValueError:
        return 1


def __getattr__(name: str) -> Any:
    # The wrapper classes subclass torch modules: reach them without importing torch here.
    if name in ("SingleProcessDataParallel", "TransparentDDP"):
        from . import _parallel_modules

        return getattr(_parallel_modules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
