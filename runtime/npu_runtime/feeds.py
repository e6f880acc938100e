"""What counts as a sign of life for the watchdog, and what each sign costs.

- **Optimizer steps**: a global ``register_optimizer_step_post_hook``, always on. Its
  body is one ``time.monotonic()`` and one attribute store.
- **Module forwards and data-loader batches** (evaluation, data passes): a global
  module forward pre-hook and a wrapper around ``_BaseDataLoaderIter.__next__``. A
  global module hook sends every module call through the slow path of
  ``nn.Module._call_impl`` (about 0.9 µs per module call here), so these two are
  *armed by the watchdog's checker thread only while no optimizer step has come for a
  quarter of the timeout*, and disarmed at the next step. Training loops pay nothing
  for them; an evaluation pays from its first quarter-timeout on.
- **Imports**: a finder first on ``sys.meta_path`` that notes the time and defers to
  the others. It runs once per module imported for the first time, so startup and the
  lazy imports of a first step (inductor, dynamo) count; a module whose top-level
  code hangs does not.
- The runtime's own checkpoint writes and explicit ``beat()`` calls feed the watchdog
  directly.

Under ``torch.compile`` the forward hook does nothing inside the traced graph
(``torch.compiler.is_compiling()`` is constant-folded to True, so no graph break); the
compiled module's own outer call still feeds the watchdog.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from typing import Any

_monotonic = time.monotonic


class Feeds:
    """The hooks of one watchdog. ``target.last_step`` / ``target.last_beat`` receive the
    time of the latest step / other sign of life."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self._step_handle = None
        self._forward_handle = None
        self._import_finder: _ImportFeed | None = None
        self._lock = threading.Lock()
        self.quiet_armed = False

    # -------------------------------------------------------------- optimizer steps
    def _step_hook(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self.target.last_step = _monotonic()

    def hook_steps(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._step_handle = register_optimizer_step_post_hook(self._step_hook)

    # -------------------------------------------------------------- imports
    def hook_imports(self) -> None:
        if self._import_finder is None:
            self._import_finder = _ImportFeed(self.target)
            sys.meta_path.insert(0, self._import_finder)

    def unhook_imports(self) -> None:
        finder, self._import_finder = self._import_finder, None
        if finder is not None:
            finder.target = None
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(finder)

    # -------------------------------------------------------------- quiet phases
    def arm_quiet(self) -> None:
        """Count module forwards and data-loader batches too (called by the checker)."""
        with self._lock:
            if self.quiet_armed:
                return
            from torch.nn.modules.module import register_module_forward_pre_hook

            _quiet_compile_warning()
            self._forward_handle = register_module_forward_pre_hook(_forward_hook_for(self.target))
            _DataLoaderFeed.attach(self.target)
            self.quiet_armed = True

    def disarm_quiet(self) -> None:
        with self._lock:
            if not self.quiet_armed:
                return
            if self._forward_handle is not None:
                self._forward_handle.remove()
                self._forward_handle = None
            _DataLoaderFeed.detach(self.target)
            self.quiet_armed = False

    def remove(self) -> None:
        self.disarm_quiet()
        self.unhook_imports()
        if self._step_handle is not None:
            self._step_handle.remove()
            self._step_handle = None

    def forget_inherited(self) -> None:
        """In a forked child: drop the parent's hooks (the hook tables are this process's
        copies). The checker thread may have held the lock at fork(): take a new one."""
        self._lock = threading.Lock()
        self.remove()


class _ImportFeed:
    """A meta-path finder that finds nothing: it only notes that an import is running."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def find_spec(self, _name: str, _path: Any = None, _target: Any = None) -> None:
        watched = self.target
        if watched is not None:
            watched.last_beat = _monotonic()


def _forward_hook_for(target: Any):
    import torch

    is_compiling = torch.compiler.is_compiling

    def forward_beat(_module: Any, _args: Any) -> None:
        if not is_compiling():  # inside a dynamo trace: a constant, no graph break
            target.last_beat = _monotonic()

    return forward_beat


_compile_warning_quieted = False


def _quiet_compile_warning() -> None:
    # torch.compile warns on every compiled-module call while any global module hook
    # exists (the hook fires once more for the OptimizedModule); for a beat, harmless.
    global _compile_warning_quieted
    if not _compile_warning_quieted:
        warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
                                category=UserWarning)
        _compile_warning_quieted = True


class _DataLoaderFeed:
    """Wraps ``_BaseDataLoaderIter.__next__`` once; the wrapper feeds whichever watchdog
    is attached (none: one attribute read per batch)."""

    target: Any = None
    _original: Any = None
    _lock = threading.Lock()

    @classmethod
    def attach(cls, target: Any) -> None:
        with cls._lock:
            cls.target = target
            if cls._original is not None:
                return
            from torch.utils.data import dataloader

            original = dataloader._BaseDataLoaderIter.__next__

            def __next__(self):
                data = original(self)
                watched = cls.target
                if watched is not None:
                    watched.last_beat = _monotonic()
                return data

            __next__.__wrapped__ = original  # type: ignore[attr-defined]
            dataloader._BaseDataLoaderIter.__next__ = __next__
            cls._original = original

    @classmethod
    def detach(cls, target: Any) -> None:
        with cls._lock:
            if cls.target is target:
                cls.target = None


def _new_lock_in_child() -> None:
    _DataLoaderFeed._lock = threading.Lock()  # a parent thread may have held it at fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)
