"""What counts as a sign of life for the watchdog, and what each sign costs.

- **Optimizer steps**: a global ``register_optimizer_step_post_hook``, always on. Its
  body is one ``time.monotonic()`` and one attribute store.
- **Module forwards and data-loader batches** (evaluation, data passes): *armed by the
  watchdog's checker thread only while no optimizer step has come for a quarter of the
  timeout*, and disarmed at the next step, so training loops pay nothing for them.
  Batches: a wrapper around ``_BaseDataLoaderIter.__next__``. Forwards: any module
  hook sends a call through the slow path of ``nn.Module._call_impl`` (about 0.9 µs
  here), so a global forward pre-hook runs only until it sees an outermost module call
  (no other module call on the stack: the model being evaluated); then that module
  alone gets a forward pre-hook and the global one goes. An evaluation pays one hooked
  call per model forward, its submodules nothing. If the hooked module stops being
  called (another model is evaluated) for a quarter of the timeout, the global hook
  looks again.
- **Imports**: a finder first on ``sys.meta_path`` that notes the time and defers to
  the others. It runs once per module imported for the first time, so startup and the
  lazy imports of a first step (inductor, dynamo) count; a module whose top-level
  code hangs does not.
- The runtime's own checkpoint writes and explicit ``beat()`` calls feed the watchdog
  directly.

Under ``torch.compile`` the forward hooks do nothing inside a traced graph
(``torch.compiler.is_dynamo_compiling()`` is constant-folded to True, so no graph
break), and the hook of an outermost module runs outside the compiled frame; adding or
removing it does not recompile.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
import weakref
from typing import Any

_monotonic = time.monotonic


class Feeds:
    """The hooks of one watchdog. ``target.last_step`` / ``target.last_beat`` receive the
    time of the latest step / other sign of life."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self._step_handle = None
        self._forwards: _ForwardFeed | None = None
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
            self._forwards = _ForwardFeed(self.target)
            self._forwards.discover()
            _DataLoaderFeed.attach(self.target)
            self.quiet_armed = True

    def rediscover(self) -> None:
        """The hooked module has not been called for a while: look for the one that is."""
        with self._lock:
            if self._forwards is not None:
                self._forwards.discover()

    def disarm_quiet(self) -> None:
        with self._lock:
            if not self.quiet_armed:
                return
            if self._forwards is not None:
                self._forwards.remove()
                self._forwards = None
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


class _ForwardFeed:
    """Beats on forwards of the outermost module being called (see the module docstring)."""

    def __init__(self, target: Any) -> None:
        import torch

        self.target = target
        self._is_compiling = torch.compiler.is_dynamo_compiling
        self._call_impl = torch.nn.Module._call_impl.__code__
        self._lock = threading.Lock()
        self._global = None
        self._root = None
        self._root_ref: Any = None  # a weak reference: the model must stay free to go

    @property
    def root_module(self) -> Any:
        return self._root_ref() if self._root_ref is not None else None

    def discover(self) -> None:
        from torch.nn.modules.module import register_module_forward_pre_hook

        with self._lock:
            self._drop_root()
            if self._global is None:
                _quiet_compile_warning()
                self._global = register_module_forward_pre_hook(self._seen)

    def _seen(self, module: Any, _args: Any) -> None:
        if self._is_compiling():  # inside a dynamo trace: a constant, no graph break
            return
        self.target.last_beat = _monotonic()
        if self._outermost():
            with self._lock:
                if self._global is not None:
                    self._global.remove()  # safe: _call_impl iterates a copy of the hooks
                    self._global = None
                    self._drop_root()
                    self._root = module.register_forward_pre_hook(self._beat)
                    self._root_ref = weakref.ref(module)

    def _outermost(self) -> bool:
        """Is the module call being made the only one on this thread's stack?"""
        calls, frame = 0, sys._getframe(1)
        while frame is not None:
            if frame.f_code is self._call_impl:
                calls += 1
                if calls > 1:
                    return False
            frame = frame.f_back
        return calls == 1

    def _beat(self, _module: Any, _args: Any) -> None:
        if not self._is_compiling():
            self.target.last_beat = _monotonic()

    def _drop_root(self) -> None:
        if self._root is not None:
            self._root.remove()
            self._root = None
            self._root_ref = None

    def remove(self) -> None:
        with self._lock:
            self._drop_root()
            if self._global is not None:
                self._global.remove()
                self._global = None


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
