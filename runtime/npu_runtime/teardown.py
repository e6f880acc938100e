"""At exit, tear down the process group npu_runtime created, in the safe order.

Migrated scripts never call ``destroy_process_group`` for the group that
:func:`npu_runtime.init_distributed` (or :func:`~npu_runtime.init_data_parallel`)
created for them. Left to interpreter finalisation, a gloo group can abort the
process after the script finished ("terminate called without an active
exception") or hang it; docs/e2e.md ("Exit aborts") traces the chain. So the
runtime undoes what it set up, while the interpreter is still whole, in the order
that is safe:

1. ``torch.distributed.nn`` is imported before the group exists (:func:`before_group`),
   so the ``group=group.WORLD`` defaults of its functions do not pin the group;
2. at exit, garbage is collected (a model the script dropped but a reference cycle
   kept), and every DDP model on that group still alive (a module-level ``net``,
   whether ``data_parallel`` or the script made it) lets go of it: its ``reducer``, ``logger`` and
   ``process_group``, what DDP itself leaves out when it is pickled, are dropped
   while torch still has the group registered, so none of them is its last holder
   (the reducer, freed under the GIL, would then join gloo's threads under it);
3. then the group is destroyed (sub-groups made from it too, as torch does). Nothing
   else holds it, so Python frees it there and then, and its binding releases the
   GIL while the backend's threads are joined.

Every wait in this happens with the GIL free and is bounded: the emulated ``hccl``
backend's drain (60 s), gloo's join (its works end within the group's timeout).
The models stripped in step 2 can no longer run forward or backward; exit handlers
registered before ``init_distributed`` run after this one.

A group the script created itself, and one it destroyed (or replaced) itself, are
left alone, and so are the models on it. This module imports torch only when called.
"""

from __future__ import annotations

import atexit
import gc
import weakref
from typing import Any

#: What DDP holds of its process group; DistributedDataParallel.__getstate__ drops these too.
DDP_GROUP_STATE = ("reducer", "logger", "process_group")

_group: weakref.ReferenceType | None = None


def before_group() -> None:
    """Call before creating a process group (step 1 above)."""
    import torch.distributed.nn  # noqa: F401


def own_group(group: Any) -> None:
    """Tear ``group`` down at exit, unless the script destroyed it first."""
    global _group
    if _group is None:
        atexit.register(at_exit)
    _group = weakref.ref(group)


def _ddp_states(group: Any) -> list[dict]:
    """The attribute dicts of the live DDP models on ``group``: those refer to it."""
    from torch.nn.parallel import DistributedDataParallel

    states = []
    for holder in gc.get_referrers(group):
        state = vars(holder) if isinstance(holder, DistributedDataParallel) else holder
        if isinstance(state, dict) and state.get("process_group") is group and "reducer" in state:
            states.append(state)
    return states


def at_exit() -> None:
    import torch.distributed as dist

    gc.collect()  # what only garbage still holds goes first, while the group is still referenced
    group = _group() if _group is not None else None
    if group is None or not dist.is_initialized() or dist.group.WORLD is not group:
        return  # the script destroyed (or replaced) the runtime's group itself: its teardown, not ours
    ddp_states = _ddp_states(group)
    for state in ddp_states:
        for name in DDP_GROUP_STATE:
            state.pop(name, None)
    del group, ddp_states
    dist.destroy_process_group()
