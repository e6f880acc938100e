"""What counts as a sign of life for the watchdog, and what each sign costs.

- **Optimizer steps**: a global ``register_optimizer_step_post_hook``, always on. Its
  body is one ``time.monotonic()`` and one attribute store.
- **Data-loader batches**: a wrapper around ``_BaseDataLoaderIter.__next__`` while a
  watchdog runs (one extra call and a store per batch).
- **Module forwards** (evaluation): any module hook sends a call through the slow path
  of ``nn.Module._call_impl`` (about 0.9 µs on an idle core), and a hook stored in a
  user's module would travel with ``copy.deepcopy`` and ``torch.save(model)``. So the
  forward feed is a *one-shot global* forward pre-hook: the watchdog's checker thread
  arms it whenever a check interval passed without any sign of life, the next module
  call anywhere notes the time and removes it. Training (steps every interval) never
  arms it; an evaluation pays one slow module call per check interval.
- **Imports**: a finder first on ``sys.meta_path`` that notes the time and defers to
  the others. It runs once per module imported for the first time, so startup and the
  lazy imports of a first step (inductor, dynamo) count; a module whose top-level
  code hangs does not.
- The runtime's own checkpoint writes and explicit ``beat()`` calls feed the watchdog
  directly.

Under ``torch.compile`` the forward hook does nothing inside a traced graph
(``torch.compiler.is_dynamo_compiling()`` is constant-folded to True, so no graph
break); a compiled module's own outer call runs it eagerly. Adding and removing a
global hook does not recompile.
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
        self._forwards: _ForwardFeed | None = None
        self._import_finder: _ImportFeed | None = None
        self._lock = threading.Lock()

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

    # -------------------------------------------------------------- batches and forwards
    def hook_batches(self) -> None:
        _DataLoaderFeed.attach(self.target)

    def arm_forward(self) -> None:
        """Let the next module forward (anywhere) note the time (called by the checker)."""
        with self._lock:
            if self._forwards is None:
                self._forwards = _ForwardFeed(self.target)
            self._forwards.arm()

    @property
    def forward_armed(self) -> bool:
        return self._forwards is not None and self._forwards.armed

    def remove(self) -> None:
        with self._lock:
            if self._forwards is not None:
                self._forwards.remove()
                self._forwards = None
        _DataLoaderFeed.detach(self.target)
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
    """A one-shot global forward pre-hook (see the module docstring)."""

    def __init__(self, target: Any) -> None:
        import torch

        self.target = target
        self._is_compiling = torch.compiler.is_dynamo_compiling
        self._lock = threading.Lock()
        self._handle = None

    @property
    def armed(self) -> bool:
        return self._handle is not None

    def arm(self) -> None:
        from torch.nn.modules.module import register_module_forward_pre_hook

        with self._lock:
            if self._handle is None:
                _quiet_compile_warning()
                self._handle = register_module_forward_pre_hook(self._fire)

    def _fire(self, _module: Any, _args: Any) -> None:
        if self._is_compiling():  # inside a dynamo trace: a constant, no graph break
            return
        self.target.last_beat = _monotonic()
        self.remove()  # safe: _call_impl iterates a copy of the hooks

    def remove(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.remove()
                self._handle = None


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
