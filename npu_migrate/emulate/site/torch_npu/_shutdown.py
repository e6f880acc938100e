"""Let torch's worker threads finish with Python objects before the interpreter shuts down.

With torch 2.13, a C++ thread that releases a Python object must take the GIL.
Once interpreter finalisation has begun it cannot, the thread is cancelled, and
the process aborts ("terminate called without an active exception") after the
script has finished. Two such releases happen late on the emulated NPU:

- The autograd thread of each npu device releases a finished graph task shortly
  *after* ``backward()`` has returned, and the task's thread-local state holds
  the ``contextvars.Context`` that ``backward()`` stashes. A script that ends
  right after its last step can be in finalisation by then. At exit,
  ``settle_autograd_threads()`` runs one tiny backward on every npu device,
  straight through the engine (so nothing is stashed). A device thread takes
  tasks in order, so once that backward has returned, the thread has released
  every earlier graph task, with the GIL free while the main thread waited.
- DDP imports ``torch.distributed.nn`` after ``init_process_group``; its
  functions' ``group=group.WORLD`` default arguments would then keep the group,
  and gloo's threads, alive into finalisation. ``install()`` imports it first,
  while no group exists (``_hccl.py`` covers what gloo itself holds).
- A script that never calls ``destroy_process_group`` (migrated scripts, whose
  group npu_runtime creates) leaves its group, and gloo's threads, to
  finalisation. At exit, ``destroy_process_groups()`` does what the real
  torch_npu's exit handler does (``_destructor_process_group``): it shuts every
  group down, which lets the ``hccl`` backend wait until gloo has let go of
  everything Python gave it, and forgets them. A group nothing else holds is
  freed right there (its binding releases the GIL while gloo's threads are
  joined); one a live DDP model still holds is freed in finalisation, by then
  with nothing in gloo that needs Python.

docs/e2e.md ("Exit aborts") has the whole chain.
"""

from __future__ import annotations

import atexit
import ctypes
import gc

#: Tensors of the settling backwards. The device thread releases its last graph
#: task, which refers to them, after the backward returned: their Python objects
#: must never be freed, or that release would need the GIL again.
_kept: list = []
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_kept))


def settle_autograd_threads() -> None:
    """Return once every npu autograd thread has released the graph tasks it ran."""
    import torch
    from torch.autograd.variable import Variable

    for index in range(torch.npu.device_count()):
        leaf = torch.ones(1, device=f"npu:{index}", requires_grad=True)
        with torch.enable_grad():
            out = leaf * 2
        grad = torch.ones_like(out)
        _kept.extend((leaf, out, grad))
        Variable._execution_engine.run_backward((out,), (grad,), False, False, (), False, True)


def destroy_process_groups() -> None:
    """Shut down and forget every process group the script left (torch_npu does so at exit)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        gc.collect()  # a group held only by garbage (a dropped DDP model's cycles) goes now


def at_exit() -> None:
    settle_autograd_threads()
    destroy_process_groups()


#: What DDP holds of its process group (what DistributedDataParallel.__getstate__ drops).
DDP_GROUP_STATE = ("reducer", "logger", "process_group")


def release_ddp_models(group) -> int:
    """Make every live DDP model on ``group`` let go of it: its reducer, logger and group
    are dropped while torch still has the group registered (npu_runtime's teardown does
    the same for the group it owns). Returns how many models there were."""
    from torch.nn.parallel import DistributedDataParallel

    gc.collect()  # a model only garbage holds goes first, while the group is still referenced
    found = 0
    for holder in gc.get_referrers(group):
        state = vars(holder) if isinstance(holder, DistributedDataParallel) else holder
        if isinstance(state, dict) and state.get("process_group") is group and "reducer" in state:
            for name in DDP_GROUP_STATE:
                state.pop(name, None)
            found += 1
    return found


def guard_destroy() -> None:
    """``destroy_process_group()`` of the default group first lets the DDP models on it go.

    A script that destroys its group itself and keeps its DDP model (a local of the
    ``mp.spawn`` worker, a module-level ``model``) has the reducer freed afterwards, and
    with it the group's last reference: gloo's destructor then joins its threads inside
    ``~Reducer`` with the GIL held, and a gloo thread that must drop a Python object waits
    for that GIL forever (a two-rank ``mp.spawn`` script hung over 10 minutes in rank 1,
    ``~ProcessGroupGloo`` under ``~Reducer``). Freed here, before destroy, the reducer
    finds the group still registered, and destroy frees the group from Python, which
    releases the GIL while gloo's threads are joined. A DDP model can no longer run
    forward or backward after this (its group is gone anyway); ``model.module`` can.
    """
    import torch.distributed as dist

    original = dist.destroy_process_group
    if getattr(original, "_npu_emulator", False):
        return

    def destroy_process_group(group=None):
        if dist.is_initialized() and (group is None or group is dist.group.WORLD):
            world = dist.group.WORLD
            if world is not None:
                release_ddp_models(world)
            del world
        return original(group)

    destroy_process_group.__wrapped__ = original
    destroy_process_group.__doc__ = original.__doc__
    destroy_process_group._npu_emulator = True
    dist.destroy_process_group = destroy_process_group


def install() -> None:
    import torch.distributed.nn  # noqa: F401  (before any group exists: see above)

    guard_destroy()
    atexit.register(at_exit)
