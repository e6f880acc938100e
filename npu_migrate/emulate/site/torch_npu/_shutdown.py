"""Let torch's worker threads finish with Python objects before the interpreter shuts down.

With torch 2.13, a C++ thread that releases a Python object must take the GIL.
Once interpreter finalisation has begun it cannot, the thread is cancelled, and
the process aborts ("terminate called without an active exception") after the
script has finished. Two such releases happen late on the emulated NPU:

- ``backward()`` stashes a ``contextvars.Context`` in thread-local state, and
  the graph task that runs on the npu device thread keeps a copy. The device
  thread releases the graph task shortly *after* ``backward()`` has returned,
  so a script that ends right after its last step can be in finalisation by
  then. ``install()`` follows each stashed context (a pass-through wrapper around
  ``torch._C._stash_obj_in_tls``), and an ``atexit`` handler waits, with the
  GIL free, until torch no longer holds any of them.
- DDP imports ``torch.distributed.nn`` after ``init_process_group``; its
  functions' ``group=group.WORLD`` default arguments would then keep the group,
  and gloo's threads, alive into finalisation. ``install()`` imports it first,
  while no group exists (``_hccl.py`` covers what gloo itself holds).

docs/e2e.md ("Exit aborts") has the whole chain.
"""

from __future__ import annotations

import atexit
import sys
import time

#: Contexts stashed by backward(); an entry is dropped once torch has let go of it.
_contexts: list[object] = []
_ONLY_OURS = 2  # the list's reference and getrefcount's argument


def _held_by_torch() -> list[object]:
    held = [i for i in range(len(_contexts)) if sys.getrefcount(_contexts[i]) > _ONLY_OURS]
    _contexts[:] = [_contexts[i] for i in held]
    return _contexts


def _follow_stashed_contexts(stash):
    def stash_and_follow(key, obj):
        if key == "context":
            _held_by_torch()
            _contexts.append(obj)
        return stash(key, obj)

    return stash_and_follow


def wait_for_torch_threads(timeout_s: float = 30.0) -> None:
    """Return once torch's threads hold none of the stashed contexts, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while _held_by_torch() and time.monotonic() < deadline:
        time.sleep(0.001)  # the GIL is free: a device thread can finish its release
    _contexts.clear()


def install() -> None:
    import torch.distributed.nn  # before any group exists: see above

    torch._C._stash_obj_in_tls = _follow_stashed_contexts(torch._C._stash_obj_in_tls)
    atexit.register(wait_for_torch_threads)
