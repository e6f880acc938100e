"""Training health under ``install()``: NaN/Inf losses, loss spikes, slow steps, full memory.

Nothing in the training script changes. ``install()`` starts a ``HealthMonitor`` unless
``NPU_RUNTIME_HEALTH=0``; it watches
- **losses**: every tensor on which ``backward()`` is called (through
  ``torch.autograd.backward``, which ``Tensor.backward`` calls; several tensors at once
  too). A scalar is a loss: NaN/Inf and spikes are watched (several scalars passed
  together count as their sum). A tensor with more elements (a per-sample loss given a
  ``gradient``, a pipeline stage's activations) is checked for NaN/Inf only, through its
  float32 sum (one reduction, no spike: its size is not a loss's). A loss that never goes
  through ``backward()`` is out of scope. The values are read at the next optimizer
  step, *before* the optimizer applies it: with ``NPU_RUNTIME_HEALTH_ACTION=stop`` a NaN
  ends the rank before the weights take the bad step. Several backward calls per step
  (gradient accumulation) are all checked, with at most one NaN/Inf event per step.
  Reading the losses is one device synchronisation per step, which most loops already
  pay by logging ``loss.item()``; a loop that never calls an optimizer's ``step()`` has
  its values read every ``MAX_PENDING`` backward calls instead of holding them.
- **loss scaling** (``torch.amp.GradScaler``, which torch_npu's scaler derives from): a
  step the scaler skips because the gradients overflowed is its normal dynamic loss
  scaling (fp16 overflows now and then; the weights are not touched), so a NaN/Inf loss
  in a skipped step is an ``overflow_skipped`` event, never a stop. Only when
  ``NPU_RUNTIME_OVERFLOW_LIMIT`` (default 20) skipped steps in a row had a NaN/Inf loss
  (the scale collapses and nothing trains: a diverged model, not an overflow) is it a
  ``nan_loss``/``inf_loss`` event, which stops the rank under ``stop``. A skipped step
  ends a step-time interval, so the next step is not a false ``slow_step``.
- **step time**: the time between two optimizer steps against the running median of
  the last ``WINDOW`` steps (the first step, with its compilation, is not counted). A
  slow step needs both the ratio (``NPU_RUNTIME_SLOW_STEP_FACTOR``) and an absolute
  floor over the median (``NPU_RUNTIME_SLOW_STEP_MIN_S``, 0.5 s). An interval that
  evaluates or checkpoints is neither judged nor counted: ``with phase("eval"):``,
  ``model.eval()`` (``Module.train(False)``) and the runtime's own saves mark it. Data
  loading between two steps counts.
- **device memory**: memory reserved by the caching allocator against the device's
  capacity, after each step.
Collective time is not measured: HCCL's own timeouts and the watchdog cover a stuck
collective, and timing every collective would cost a synchronisation each.

Each event is one JSON line, appended to the file named by ``NPU_RUNTIME_EVENTS`` (opened
without following links, mode 0600, by :class:`EventSink`'s thread: a full disk, a FIFO
without reader, a directory, a link or a hung mount is one warning, never an exception
or a wait in a hook) and logged on the ``npu_runtime`` logger::

    {"event": "nan_loss", "step": 41, "rank": 0, "value": "nan", "threshold": null, "time": 1767...}

``step`` is the number of optimizer steps completed before the event (from 0).

Settings (environment): ``NPU_RUNTIME_HEALTH_ACTION`` ``warn`` (default) or ``stop`` (exit
``exitcodes.HEALTH`` = 76 after a NaN/Inf loss, so the launcher restarts from the last
good checkpoint); ``NPU_RUNTIME_LOSS_SPIKE_FACTOR`` (default 3: a loss above 3x the
running median is a spike); ``NPU_RUNTIME_SLOW_STEP_FACTOR`` (default 2) and ``NPU_RUNTIME_SLOW_STEP_MIN_S`` (default
0.5: a slow step must also exceed the median by this many seconds, so that scheduler
jitter on a loaded machine is not an event);
``NPU_RUNTIME_MEMORY_THRESHOLD`` (default 0.95 of capacity); ``NPU_RUNTIME_OVERFLOW_LIMIT``
(default 20 skipped steps in a row with a NaN/Inf loss under a GradScaler).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from . import devices, exitcodes
from .bounds import BoundError, bounded_int

log = logging.getLogger("npu_runtime")

WINDOW = 50
MIN_SAMPLES = 5
MAX_PENDING = 256
#: a slow step must exceed the running median by this many seconds too (NPU_RUNTIME_SLOW_STEP_MIN_S)
SLOW_STEP_MIN_S = 0.5
ACTIONS = ("warn", "stop")

#: events waiting for the writer thread; more are dropped (and counted), never waited for
QUEUE_MAX = 1024
#: a write (or open) that has not returned after this long marks the file as stalled
WRITE_TIMEOUT_S = 2.0
#: events kept in memory (``HealthMonitor.events``); the oldest go first
MEMORY_MAX = 10000


_UNKNOWN = object()

_active: HealthMonitor | None = None
_lock = threading.Lock()


def _float_setting(environ: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw[:64])
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        log.warning("npu_runtime health: %s=%r is not a number in [%g, %g]; using %g", name, raw[:64], low, high,
                    default)
        return default
    return value


class RunningWindow:
    """The last ``size`` values and their median, kept sorted as they come (a bisect per
    value instead of a sort per step)."""

    def __init__(self, size: int) -> None:
        self._values: deque[float] = deque()
        self._sorted: list[float] = []
        self._size = size

    def __len__(self) -> int:
        return len(self._values)

    def append(self, value: float) -> None:
        if len(self._values) == self._size:
            del self._sorted[bisect.bisect_left(self._sorted, self._values.popleft())]
        self._values.append(value)
        bisect.insort(self._sorted, value)

    def median(self) -> float:
        ordered, n = self._sorted, len(self._sorted)
        middle = n // 2
        return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class HealthMonitor:
    """Watches one process's training. ``clock`` and ``exit`` are injectable for tests."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, clock: Callable[[], float] = time.monotonic,
                 exit: Callable[[int], Any] | None = None) -> None:
        environ = os.environ if environ is None else environ
        action = environ.get("NPU_RUNTIME_HEALTH_ACTION", "warn").strip().lower() or "warn"
        if action not in ACTIONS:
            log.warning("npu_runtime health: NPU_RUNTIME_HEALTH_ACTION=%r is not warn or stop; using warn",
                        action[:64])
            action = "warn"
        self.action = action
        self.spike_factor = _float_setting(environ, "NPU_RUNTIME_LOSS_SPIKE_FACTOR", 3.0, 1.0, 1e6)
        self.slow_factor = _float_setting(environ, "NPU_RUNTIME_SLOW_STEP_FACTOR", 2.0, 1.0, 1e6)
        self.slow_min_s = _float_setting(environ, "NPU_RUNTIME_SLOW_STEP_MIN_S", SLOW_STEP_MIN_S, 0.0, 1e6)
        self.memory_threshold = _float_setting(environ, "NPU_RUNTIME_MEMORY_THRESHOLD", 0.95, 0.0, 1.0)
        self.overflow_limit = int(_float_setting(environ, "NPU_RUNTIME_OVERFLOW_LIMIT", 20, 1, 1e6))
        self.events_path = environ.get("NPU_RUNTIME_EVENTS") or None
        self._sink = EventSink(self.events_path) if self.events_path else None
        if self._sink is not None:
            _sinks.append(self._sink)
        self.rank = _rank(environ)
        self._rank_known = bool((environ.get("RANK") or "").strip())  # else learnt from the group (learn_rank)
        self.clock = clock
        self._exit = exit or _exit_rank
        self.step = 0
        self.events: deque[dict[str, Any]] = deque(maxlen=MEMORY_MAX)
        self._pending: list[tuple[Any, bool]] = []  # (0-d tensor, is a loss value rather than a finiteness probe)
        self._stepped = False  # an optimizer step ran since the last GradScaler.step began
        self._overflows = 0  # GradScaler steps skipped in a row with a NaN/Inf loss
        self._reported_step = -1  # the step of the last NaN/Inf event (one per step)
        self._scaler_patches: list[tuple[Any, Any]] = []
        self._losses = RunningWindow(WINDOW)
        self._durations = RunningWindow(WINDOW)
        self._last_step_end: float | None = None
        self._marked: str | None = None  # the interval holds an evaluation or a checkpoint (phase())
        self._phase_depth = 0
        self._train_patch: Any = None
        self._memory_high = False
        self._capacity: dict[Any, int] = {}
        self._device: Any = _UNKNOWN
        self._handles: list[Any] = []
        self._original_backward: Any = None

    # ------------------------------------------------------------------ hooks
    def start(self) -> HealthMonitor:
        import torch
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._handles.append(register_optimizer_step_pre_hook(self._before_step))
        self._handles.append(register_optimizer_step_post_hook(self._after_step))
        original = torch.autograd.backward
        monitor = self

        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            monitor.observe_backward(tensors)
            return original(tensors, *args, **kwargs)

        backward.__wrapped__ = original  # type: ignore[attr-defined]
        backward.__doc__ = original.__doc__
        self._original_backward = original
        torch.autograd.backward = backward
        self._patch_scalers()
        self._patch_eval()
        return self

    def _patch_eval(self) -> None:
        """``model.eval()`` (``train(False)``) marks the interval as an evaluation: loops
        such as nanoGPT's evaluate (and checkpoint) between two steps without telling us."""
        import torch

        original = torch.nn.Module.__dict__.get("train")
        if original is None or getattr(original, "_npu_runtime", False):
            return
        monitor = self

        def train(module: Any, mode: bool = True) -> Any:
            if not mode:
                monitor._marked = "eval"
            return original(module, mode)

        train.__wrapped__ = original  # type: ignore[attr-defined]
        train.__doc__ = original.__doc__
        train._npu_runtime = True  # type: ignore[attr-defined]
        torch.nn.Module.train = train
        self._train_patch = original

    def _patch_scalers(self) -> None:
        """Wrap ``GradScaler.step`` (torch.amp's, and torch_npu's where it is its own class)
        to see the steps the scaler skips."""
        import torch

        classes = [getattr(getattr(torch, "amp", None), "GradScaler", None)]
        torch_npu = sys.modules.get("torch_npu")
        with contextlib.suppress(Exception):
            classes.append(torch_npu.npu.amp.GradScaler)  # type: ignore[union-attr]
        monitor = self
        for cls in classes:
            if cls is None or any(issubclass(cls, done) for done, _ in self._scaler_patches):
                continue
            original = cls.__dict__.get("step")
            if original is None:
                continue

            def step(scaler: Any, optimizer: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                monitor._stepped = False
                result = _original(scaler, optimizer, *args, **kwargs)
                if not monitor._stepped:
                    monitor.scaler_skipped()
                return result

            step.__wrapped__ = original  # type: ignore[attr-defined]
            step.__doc__ = original.__doc__
            cls.step = step
            self._scaler_patches.append((cls, original))

    def stop(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._original_backward is not None:
            import torch

            torch.autograd.backward = self._original_backward
            self._original_backward = None
        for cls, original in self._scaler_patches:
            cls.step = original
        self._scaler_patches.clear()
        if self._train_patch is not None:
            import torch

            torch.nn.Module.train = self._train_patch
            self._train_patch = None
        self.flush()

    def observe_backward(self, tensors: Any) -> None:
        try:  # the common case first: one scalar loss
            if tensors.numel() == 1:
                self._pending.append((tensors.detach(), True))
                if len(self._pending) > MAX_PENDING:
                    self.check_losses()
                return
        except Exception:  # noqa: BLE001, S110 - a sequence of tensors, or something we cannot judge
            pass
        items = list(tensors) if isinstance(tensors, (tuple, list)) else [tensors]
        with contextlib.suppress(Exception):
            scalars = [t.detach() for t in items if t.numel() == 1]
            for t in items:
                if t.numel() > 1:
                    import torch

                    self._pending.append((t.detach().sum(dtype=torch.float32), False))
            if len(scalars) == 1:
                self._pending.append((scalars[0], True))
            elif scalars:
                import torch

                self._pending.append((torch.stack([s.reshape(()).float() for s in scalars]).sum(), True))
        if len(self._pending) > MAX_PENDING:
            self.check_losses()

    def _before_step(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self._stepped = True
        self._overflows = 0
        try:
            self.check_losses()
        except Exception as exc:  # noqa: BLE001 - a side channel never stops training
            self._hook_failed(exc)

    def _after_step(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        try:
            self._after_step_unguarded()
        except Exception as exc:  # noqa: BLE001 - a side channel never stops training
            self._hook_failed(exc)
        finally:
            self.step += 1

    def _hook_failed(self, exc: BaseException) -> None:
        if not getattr(self, "_hook_failure_said", False):
            self._hook_failure_said = True
            log.warning("npu_runtime health: the monitor failed (%s: %s); training goes on", type(exc).__name__, exc)

    def _after_step_unguarded(self) -> None:
        now = self.clock()
        if self._last_step_end is not None and self._marked is None and not self._phase_depth:
            self.observe_step_time(now - self._last_step_end)
        self._marked = None
        self._last_step_end = now
        self.check_memory()

    # ------------------------------------------------------------------ checks
    def _read_pending(self) -> list[tuple[float, bool]]:
        pending, self._pending = self._pending, []
        values = []
        for tensor, is_loss in pending:
            try:
                values.append((float(tensor), is_loss))
            except Exception:  # noqa: BLE001, S112 - a loss we cannot read is not ours to judge
                continue
        return values

    def check_losses(self) -> None:
        for value, is_loss in self._read_pending():
            self.observe_loss(value, spike=is_loss)

    def scaler_skipped(self) -> None:
        """A GradScaler skipped the optimizer step (its gradients overflowed): the scaler's
        normal work, unless the losses themselves stay NaN/Inf for ``overflow_limit`` steps."""
        self._last_step_end = self.clock()  # the skipped iteration ends an interval
        self._marked = None
        bad = [v for v, _ in self._read_pending() if not math.isfinite(v)]
        if not bad:
            return
        self._overflows += 1
        self.emit("overflow_skipped", bad[0], None)
        if self._overflows >= self.overflow_limit:
            self._overflows = 0
            self._non_finite(bad[0], threshold=self.overflow_limit)

    def observe_loss(self, value: float, spike: bool = True) -> None:
        if not math.isfinite(value):
            self._non_finite(value)
            return
        if not spike:
            return
        if len(self._losses) >= MIN_SAMPLES:
            median = self._losses.median()
            threshold = self.spike_factor * median
            if median > 0 and value > threshold:
                self.emit("loss_spike", value, threshold)
        self._losses.append(value)

    def _non_finite(self, value: float, threshold: float | None = None) -> None:
        if self._reported_step == self.step and self.action != "stop":
            return  # one NaN/Inf event per step (gradient accumulation repeats it)
        self._reported_step = self.step
        kind = "nan_loss" if math.isnan(value) else "inf_loss"
        self.emit(kind, value, threshold)
        if self.action == "stop":
            log.error("npu_runtime health: %s loss at step %d (rank %d); NPU_RUNTIME_HEALTH_ACTION=stop: "
                      "exiting with code %d so the launcher restarts from the last good checkpoint",
                      "nan" if kind == "nan_loss" else "inf", self.step, self.rank, exitcodes.HEALTH)
            self.flush()
            self._exit(exitcodes.HEALTH)

    def observe_step_time(self, seconds: float) -> None:
        if len(self._durations) >= MIN_SAMPLES:
            median = self._durations.median()
            threshold = self.slow_factor * median
            # A few milliseconds of scheduler jitter on a millisecond step is no health problem.
            if seconds > threshold and seconds - median >= self.slow_min_s:  # ratio AND absolute floor
                self.emit("slow_step", seconds, threshold)
        self._durations.append(seconds)

    def mark_interval(self, why: str) -> None:
        """The current step interval holds ``why`` (an evaluation, a checkpoint): its time is
        neither judged nor added to the running median."""
        self._marked = why

    @contextlib.contextmanager
    def phase(self, name: str) -> Any:
        self._phase_depth += 1
        self.mark_interval(name)
        try:
            yield
        finally:
            self._phase_depth -= 1
            self.mark_interval(name)

    def check_memory(self) -> None:
        fraction = self._memory_fraction()
        if fraction is None:
            return
        high = fraction > self.memory_threshold
        if high and not self._memory_high:
            self.emit("memory_high", fraction, self.memory_threshold)
        self._memory_high = high

    def _device_module(self) -> Any:
        """``torch.npu`` or ``torch.cuda`` when available, else None; looked up once."""
        if self._device is _UNKNOWN:
            self._device = None
            with contextlib.suppress(Exception):
                import torch

                for name in ("npu", "cuda"):
                    module = devices.module_for(name)
                    if module is not None and module.is_available():
                        self._device = (name, module)
                        break
        return self._device

    def _memory_fraction(self) -> float | None:
        found = self._device_module()
        if found is None:
            return None
        name, module = found
        try:
            index = module.current_device()
            total = self._capacity.get((name, index))
            if total is None:
                total = int(module.get_device_properties(index).total_memory)
                self._capacity[(name, index)] = total
            return module.memory_reserved(index) / total if total > 0 else None
        except Exception:  # noqa: BLE001 - a device without memory statistics is simply not watched
            return None

    # ------------------------------------------------------------------ output
    def learn_rank(self) -> None:
        """Without ``RANK`` (``mp.spawn`` workers set none), the rank is the default
        process group's, while one exists; the exit guard asks before the group is
        destroyed, so an ``exit_hang`` event after it names the right rank."""
        if self._rank_known:
            return
        with contextlib.suppress(Exception):
            dist = sys.modules.get("torch.distributed")
            if dist is not None and dist.is_available() and dist.is_initialized():
                self.rank = int(dist.get_rank())
                self._rank_known = True

    def emit(self, event: str, value: float, threshold: float | None) -> dict[str, Any]:
        self.learn_rank()
        record = {
            "event": event, "step": self.step, "rank": self.rank, "value": _json_number(value),
            "threshold": None if threshold is None else _json_number(threshold), "time": round(time.time(), 3),
        }
        self.events.append(record)
        log.warning("npu_runtime health: %s", _describe(record))
        if self._sink is not None:
            self._sink.put(json.dumps(record) + "\n")
        return record

    def flush(self, timeout_s: float = WRITE_TIMEOUT_S) -> bool:
        """Wait a bounded time for the events file to have every event so far."""
        return True if self._sink is None else self._sink.flush(timeout_s)


def _describe(record: Mapping[str, Any]) -> str:
    event, value, threshold = record["event"], record["value"], record["threshold"]
    where = f"at step {record['step']} (rank {record['rank']})"
    if event in {"nan_loss", "inf_loss"}:
        after = f" after {threshold:g} loss-scaler steps skipped in a row" if threshold is not None else ""
        return f"{'nan' if event == 'nan_loss' else 'inf'} loss {where}{after}"
    if event == "overflow_skipped":
        return f"{value} loss in a step the GradScaler skipped (loss-scale overflow; weights untouched) {where}"
    if event == "loss_spike":
        return f"loss spike {value:.6g} > {threshold:.6g} (running median x factor) {where}"
    if event == "slow_step":
        return f"slow step {value:.3f} s > {threshold:.3f} s (running median x factor) {where}"
    if event == "exit_hang":
        return (f"the training is over but the process had not exited after {value:.1f} s "
                f"(NPU_RUNTIME_EXIT_TIMEOUT={threshold:g}); ended with exit 0 {where}")
    return f"device memory {value:.1%} of capacity > {threshold:.0%} {where}"


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


class EventSink:
    """Appends event lines to ``NPU_RUNTIME_EVENTS`` without ever blocking or failing the
    training thread.

    ``put()`` only appends to a bounded queue; a daemon thread opens the file (``O_APPEND``,
    ``O_NOFOLLOW``, ``O_NONBLOCK``: a FIFO without a reader is ``ENXIO``, not a wait) and
    writes each line. The first failure (a full disk, a directory, a link, a FIFO nobody
    reads, a write that has not returned after ``WRITE_TIMEOUT_S``: a hung NFS mount) is
    one warning line; from then on lines are dropped (the monitor still keeps them in
    memory), and so are lines that find the queue full. ``flush(timeout)`` waits a bounded
    time for the queue to drain (the ``stop`` action and interpreter exit call it)."""

    def __init__(self, path: str) -> None:
        import queue

        self.path = path
        self.broken: str | None = None
        self.dropped = 0
        self._queue: queue.Queue[str] = queue.Queue(QUEUE_MAX)
        self._busy_since: float | None = None
        self._queued = 0  # lines put on the queue; the writer counts those it finished in _handled
        self._handled = 0
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._fd: int | None = None

    def put(self, line: str) -> None:
        """Queue one line; never blocks, never raises."""
        try:
            if self._stalled() or self.broken is not None:
                self.dropped += 1
                return
            if self._thread is None or self._pid != os.getpid():
                self._start()
            self._queue.put_nowait(line)
            self._queued += 1
        except Exception as exc:  # noqa: BLE001 - queue.Full, a thread that cannot start: drop it
            self.dropped += 1
            self._fail(f"{type(exc).__name__}: event queue full or writer unavailable")

    def _start(self) -> None:
        import queue

        if self._pid != os.getpid():  # a forked child: the parent's thread and queue are not ours
            self._queue = queue.Queue(QUEUE_MAX)
            self._pid = os.getpid()
            self._fd = None
            self._busy_since = None
            self._queued = self._handled = 0
        self._thread = threading.Thread(target=self._drain, name="npu_runtime-health-events", daemon=True)
        self._thread.start()

    def _stalled(self) -> bool:
        since = self._busy_since
        if since is not None and time.monotonic() - since > WRITE_TIMEOUT_S:
            self._fail(f"a write has not returned for {WRITE_TIMEOUT_S:g} s")
            return True
        return False

    def _fail(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
            log.warning("npu_runtime health: cannot write events to %s (%s); later events are not written "
                        "to it (they are still logged here)", self.path, why)

    def _drain(self) -> None:
        while True:
            line = self._queue.get()
            if self.broken is None:
                self._busy_since = time.monotonic()
                try:
                    self._write(line.encode())
                except OSError as exc:
                    self._fail(exc.strerror or str(exc))
                except Exception as exc:  # noqa: BLE001 - the writer thread never dies
                    self._fail(f"{type(exc).__name__}: {exc}")
                finally:
                    self._busy_since = None
            self._handled += 1

    def _write(self, data: bytes) -> None:
        import errno
        import stat

        if self._fd is None:
            flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
            fd = os.open(self.path, flags, 0o600)
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a file, FIFO or device")
            self._fd = fd
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)  # O_NONBLOCK: a full pipe is EAGAIN, not a wait
            view = view[written:]

    def flush(self, timeout_s: float = WRITE_TIMEOUT_S) -> bool:
        """Wait at most ``timeout_s`` for the queued lines to be written; True if they were."""
        if self._thread is None or self._pid != os.getpid():
            return True
        target = self._queued
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while self._handled < target:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True


_sinks: list[EventSink] = []


def _flush_at_exit() -> None:
    for sink in _sinks:
        with contextlib.suppress(Exception):
            sink.flush()


def _rank(environ: Mapping[str, str]) -> int:
    """RANK through the runtime's one bounded parser; 0 when unset or bad (install()
    already says so for a bad one)."""
    try:
        return bounded_int(environ.get("RANK"), "RANK") or 0
    except BoundError:
        return 0


def _exit_rank(code: int) -> None:
    from . import descendants

    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(Exception):
        descendants.kill_descendants()
    with contextlib.suppress(Exception):  # atexit does not run past os._exit
        from . import own_dirs

        own_dirs.remove_before_exit()
    os._exit(code)


def enabled_by_env(environ: Mapping[str, str]) -> bool:
    return environ.get("NPU_RUNTIME_HEALTH", "1").strip().lower() not in {"0", "false", "no", "off"}


def start_from_env(environ: Mapping[str, str]) -> HealthMonitor | None:
    """Start the process's monitor (once) unless NPU_RUNTIME_HEALTH=0."""
    global _active
    with _lock:
        if _active is not None or not enabled_by_env(environ):
            return _active
        _active = HealthMonitor(environ).start()
        import atexit

        atexit.register(_flush_at_exit)  # the writer is a daemon thread: give it a bounded moment
        return _active


def active() -> HealthMonitor | None:
    return _active


@contextlib.contextmanager
def phase(name: str = "eval") -> Any:
    """``with npu_runtime.phase("eval"):`` around an evaluation, a checkpoint or anything a
    loop does now and then between two optimizer steps: the step interval that holds it is
    not judged as a slow step (nor counted in the running median). A no-op without a
    monitor; never raises on its own."""
    monitor = _active
    if monitor is None:
        yield
        return
    with monitor.phase(str(name)):
        yield


def mark_interval(why: str) -> None:
    """The current step interval holds ``why`` (the runtime's own checkpoint saves call this)."""
    monitor = _active
    if monitor is not None:
        monitor.mark_interval(why)


def _reset_for_tests() -> None:
    global _active
    with _lock:
        if _active is not None:
            _active.stop()
        _active = None
