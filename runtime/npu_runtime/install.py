"""``install()``: the one call the codemod injects at the top of a migrated entry point.

It is idempotent, never raises for a bad environment (it logs, and stores the reason
in ``InstallReport.note``; the script's own init then fails where it is called) and
never creates a process group. It
1. imports torch_npu when it is installed and loads (never required);
2. fills unset HCCL variables (HCCL_CONNECT_TIMEOUT >= 300 s with a ranktable);
3. translates Ascend Operator, per-card ranktable and ModelArts variables into
   torchrun's (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
   MASTER_PORT) so the script's own ``init_process_group()`` works unchanged;
4. sets this rank's device when the job has several ranks and an accelerator;
5. starts the Watchdog unless NPU_RUNTIME_WATCHDOG=0, and the health monitor
   (health.py: NaN/Inf losses, loss spikes, slow steps, full memory) unless
   NPU_RUNTIME_HEALTH=0, and the exit guard (exitguard.py: a rank whose training is
   over but that does not exit within NPU_RUNTIME_EXIT_TIMEOUT ends with 0);
6. makes a rank that dies of an exception the diagnose table classifies exit with its
   class (crash_class.py: 78 fatal for out of memory or an operator error, 77 hardware
   for an ECC error) instead of 1, so every launcher decides the restart by it;
7. arranges for ``torch.multiprocessing.spawn`` / ``multiprocessing.Process`` workers
   started from here to get steps 1-6 too (``children.py`` catches each worker's start,
   :func:`install_in_worker` installs there).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from . import children, heartbeat
from . import env as _env
from .errors import LaunchError

log = logging.getLogger("npu_runtime")

_lock = threading.Lock()
_result: InstallReport | None = None


@dataclass
class InstallReport:
    torch_npu: bool
    source: str
    exported: dict[str, str] = field(default_factory=dict)
    hccl_defaults: dict[str, str] = field(default_factory=dict)
    watchdog: Any = None
    note: str | None = None
    device: Any = None  # the torch.device set as current, if any
    child: str | None = None  # "spawn[i]" / "process" in a worker process started by an installed parent


def install(*, watchdog: bool | None = None, watchdog_timeout_s: float | None = None,
            environ: MutableMapping[str, str] | None = None, local_rank: int | None = None) -> InstallReport:
    """Prepare this process for an Ascend (or CUDA/CPU) launch. A second call returns the
    first call's report and does nothing. ``local_rank`` gives the slot on a node-level
    launch with several devices (the runtime passes the spawn index in spawned workers)."""
    global _result
    with _lock:
        if _result is not None:
            return _result
        environ = os.environ if environ is None else environ
        _result = _install_never_raising(watchdog, watchdog_timeout_s, environ, local_rank, child=None)
        if environ is os.environ:
            children.mark_installed(watchdog, watchdog_timeout_s, install_in_worker)
            heartbeat.create_for_children()
        return _result


def install_in_worker(proc: Any) -> None:
    """In a ``multiprocessing`` worker of an installed parent (children.py runs it as the
    worker starts): ``install()`` as the worker's target calls for, or nothing for
    library machinery."""
    _forget_after_fork()  # fork: the parent's report and watchdog are not this process's
    kind, local_rank = children.classify(getattr(proc, "_target", None), tuple(getattr(proc, "_args", ()) or ()))
    if kind is None:
        return
    report = install_child(kind, local_rank, children.settings())
    log.info("npu_runtime: installed in %s worker %s (source %s, device %s, watchdog %s)", kind, proc.name,
             report.source, report.device, "on" if report.watchdog else "off")


def install_child(kind: str, local_rank: int | None, settings: dict[str, Any]) -> InstallReport:
    """``install()`` in a worker process of an installed parent (:func:`install_in_worker`)."""
    global _result
    with _lock:
        _result = _install_never_raising(settings.get("watchdog"), settings.get("timeout_s"), os.environ, local_rank,
                                         child=kind)
        return _result


def _note(notes: list[str], message: str, *args: Any, level: int = logging.ERROR) -> None:
    text = message % args if args else message
    notes.append(text)
    log.log(level, "npu_runtime.install: %s", text)


def _install_never_raising(want_watchdog: bool | None, timeout_s: float | None, environ: MutableMapping[str, str],
                           local_rank: int | None, child: str | None) -> InstallReport:
    """``_install``, with any error it did not foresee turned into one logged line: the
    documented promise is that install() never raises."""
    try:
        return _install(want_watchdog, timeout_s, environ, local_rank, child)
    except Exception as exc:  # noqa: BLE001 - the script's own init fails where it is called
        log.error("npu_runtime.install: %s: %s (the runtime is not installed)", type(exc).__name__, exc)
        return InstallReport(False, _env.SINGLE, note=f"{type(exc).__name__}: {exc}", child=child)


def _install(want_watchdog: bool | None, timeout_s: float | None, environ: MutableMapping[str, str],
             local_rank: int | None, child: str | None) -> InstallReport:
    from . import devices, distributed

    has_npu = devices.import_torch_npu()
    notes: list[str] = []
    source = _env.detect_source(environ)
    exported: dict[str, str] = {}
    spec = None
    if source != _env.SINGLE:
        try:
            spec = _env.resolve(environ, local_rank=local_rank, host_ids=distributed.default_host_ids(environ),
                                ranktable_timeout_s=_env.ranktable_timeout_s(environ))
        except (LaunchError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
            # install() runs before the user's code: report, and let init fail where it is called.
            _note(notes, "%s", exc)
        else:
            source = spec.source
            if not spec.resolved:
                _note(notes, "%s launch with %d devices per node: this process's slot is unknown, torchrun "
                      "variables not exported (launch torchrun per node, or torch.multiprocessing.spawn)",
                      spec.source, spec.local_world_size, level=logging.WARNING)
            elif spec.world_size > 1 and spec.source != _env.TORCHRUN:
                # Scripts commonly test `"RANK" in os.environ` to decide whether to go
                # distributed, so a world of one is left looking like a plain run.
                exported = _env.torchrun_env(spec)
                for key in ("RANK", "LOCAL_RANK"):
                    if key in environ and environ[key] != exported[key]:
                        environ[f"NPU_RUNTIME_ORIGINAL_{key}"] = environ[key]
                environ.update(exported)
                if spec.device_id is not None:
                    environ.setdefault("ASCEND_DEVICE_ID", str(spec.device_id))
    hccl = distributed.apply_hccl_defaults(environ)
    try:
        exec_s = distributed.hccl_exec_timeout_s(environ) if environ.get("HCCL_EXEC_TIMEOUT") else None
    except LaunchError as exc:
        _note(notes, "%s; HCCL will reject it too", exc)
    else:
        if exec_s is not None and exec_s <= 1800:
            log.warning("npu_runtime.install: HCCL_EXEC_TIMEOUT=%d s is not above torch's default process-group "
                        "timeout (1800 s); pass timeout= to init_process_group or use init_distributed()", exec_s)
    device = None
    if spec is not None and spec.resolved and spec.world_size > 1:
        try:
            device = distributed.set_device(spec)
        except LaunchError as exc:
            _note(notes, "%s", exc)
    wd = _start_watchdog(want_watchdog, timeout_s, environ, notes)
    _start_health(environ, notes)
    from . import exitguard

    try:
        if environ is os.environ:  # the process's own install (a test's private mapping changes nothing)
            exitguard.install(environ)
    except Exception as exc:  # noqa: BLE001 - install() never raises
        _note(notes, "exit guard not started: %s", exc, level=logging.WARNING)
    from . import crash_class

    crash_class.install()
    return InstallReport(has_npu, source, exported, hccl, wd, "; ".join(notes) or None, device, child)


def _start_watchdog(want: bool | None, timeout_s: float | None, environ: MutableMapping[str, str],
                    notes: list[str]):
    from . import watchdog as _wd

    if want is None:
        want = _wd.enabled_by_env(environ)
    if not want:
        return None
    if _wd.active() is not None:
        return _wd.active()
    if timeout_s is None:
        try:
            timeout_s = _wd.timeout_from_env(environ)
        except LaunchError as exc:
            timeout_s = _wd.default_timeout_s(environ)
            _note(notes, "%s; the watchdog uses %g s", exc, timeout_s)
    return _wd.Watchdog(timeout_s, environ=environ).start()


def _start_health(environ: MutableMapping[str, str], notes: list[str]) -> None:
    from . import health

    try:
        health.start_from_env(environ)
    except Exception as exc:  # noqa: BLE001 - install() never raises; the job trains unwatched
        _note(notes, "health monitoring not started: %s", exc, level=logging.WARNING)


def _reset_for_tests() -> None:
    global _result
    from . import crash_class, health
    from . import watchdog as _wd

    health._reset_for_tests()
    crash_class._reset_for_tests()
    from . import exitguard

    exitguard._reset_for_tests()

    with _lock:
        wd = _wd.active()
        if wd is not None:
            wd.stop()
        _result = None


def _forget_after_fork() -> None:
    """In a forked child: the parent's report and watchdog do not apply here."""
    global _result
    from . import watchdog as _wd

    wd = _wd.active()
    if wd is not None:
        wd.forget_after_fork()
    _result = None


def _new_lock_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another parent thread may have held it at fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)
