"""Keep ``DataLoader(pin_memory=True)`` from changing the emulated kernels' numerics.

With ``pin_memory=True`` and worker processes, the DataLoader starts a
pin-memory thread whose first statement is ``torch.set_num_threads(1)``.
torch's comment calls that setting thread local, but part of it is process
wide (the intra-op thread count that ATen records for new threads), and CPU
kernels run afterwards on the main thread reduce in another order: a U-Net
trained with ``pin_memory=True`` stopped matching CPU after four steps (14 of
46 state tensors equal), exactly as a CPU run does after any thread calls
``torch.set_num_threads(1)``. On real hardware the kernels run on the device,
which no host thread setting touches; on the emulated NPU they are CPU
kernels, so the setting must not leak to them. The CPU reference never starts
that thread (pinning is off without an accelerator).

The loop is replaced by the same function whose ``torch`` is a view of torch
without ``set_num_threads``; nothing else about the thread changes (it still
pins every batch and sets the device index).
"""

from __future__ import annotations

import types

import torch
import torch.utils.data._utils.pin_memory as _pin_memory


class _TorchKeepingHostThreads:
    """``torch``, except that ``set_num_threads`` leaves the thread count alone."""

    def __getattr__(self, name: str):
        return getattr(torch, name)

    @staticmethod
    def set_num_threads(num_threads: int) -> None:
        return None


def install() -> None:
    loop = _pin_memory._pin_memory_loop
    if getattr(loop, "__npu_migrate_emulated__", False):
        return
    scope = dict(loop.__globals__)
    scope["torch"] = _TorchKeepingHostThreads()
    patched = types.FunctionType(
        loop.__code__, scope, loop.__name__, loop.__defaults__, loop.__closure__
    )
    patched.__kwdefaults__ = loop.__kwdefaults__
    patched.__qualname__ = loop.__qualname__
    patched.__doc__ = loop.__doc__
    patched.__npu_migrate_emulated__ = True
    _pin_memory._pin_memory_loop = patched
