"""``install()``: the one call the codemod injects at the top of a migrated entry point.

It is cheap, idempotent and never creates a process group. It
1. imports torch_npu when it is installed and loads (never required);
2. fills unset HCCL variables (HCCL_CONNECT_TIMEOUT >= 300 s with a ranktable);
3. translates Ascend Operator, per-card ranktable and ModelArts variables into
   torchrun's (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
   MASTER_PORT) so the script's own ``init_process_group()`` works unchanged;
4. starts the Watchdog unless NPU_RUNTIME_WATCHDOG=0.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

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


def install(*, watchdog: bool | None = None, watchdog_timeout_s: float | None = None,
            environ: MutableMapping[str, str] | None = None) -> InstallReport:
    """Prepare this process for an Ascend (or CUDA/CPU) launch. A second call returns the
    first call's report and does nothing."""
    global _result
    with _lock:
        if _result is not None:
            return _result
        _result = _install(watchdog, watchdog_timeout_s, os.environ if environ is None else environ)
        return _result


def _install(want_watchdog: bool | None, timeout_s: float | None,
             environ: MutableMapping[str, str]) -> InstallReport:
    from . import devices, distributed
    from . import watchdog as _wd

    has_npu = devices.import_torch_npu()
    note = None
    source = _env.detect_source(environ)
    exported: dict[str, str] = {}
    if source not in (_env.TORCHRUN, _env.SINGLE):
        try:
            spec = _env.resolve(environ, host_ids=distributed.default_host_ids(environ),
                                ranktable_timeout_s=float(environ.get("NPU_RUNTIME_RANKTABLE_TIMEOUT", "300")))
        except LaunchError as exc:
            # install() runs before the user's code: report, and let init fail where it is called.
            note = str(exc)
            log.error("npu_runtime.install: %s", exc)
        else:
            if not spec.resolved:
                note = (f"{spec.source} launch with {spec.local_world_size} devices per node: this process's "
                        f"slot is unknown, torchrun variables not exported (launch torchrun per node)")
                log.warning("npu_runtime.install: %s", note)
            elif spec.world_size > 1:
                # Scripts commonly test `"RANK" in os.environ` to decide whether to go
                # distributed, so a world of one is left looking like a plain run.
                exported = _env.torchrun_env(spec)
                for key in ("RANK", "LOCAL_RANK"):
                    if key in environ and environ[key] != exported[key]:
                        environ[f"NPU_RUNTIME_ORIGINAL_{key}"] = environ[key]
                environ.update(exported)
                if spec.device_id is not None:
                    environ.setdefault("ASCEND_DEVICE_ID", str(spec.device_id))
            source = spec.source
    hccl = distributed.apply_hccl_defaults(environ)
    exec_s = distributed.hccl_exec_timeout_s(environ) if environ.get("HCCL_EXEC_TIMEOUT") else None
    if exec_s is not None and exec_s <= 1800:
        log.warning("npu_runtime.install: HCCL_EXEC_TIMEOUT=%d s is not above torch's default process-group "
                    "timeout (1800 s); pass timeout= to init_process_group or use init_distributed()", exec_s)
    wd = None
    if want_watchdog is None:
        want_watchdog = _wd.enabled_by_env(environ)
    if want_watchdog:
        wd = _start_watchdog(timeout_s, environ)
    return InstallReport(has_npu, source, exported, hccl, wd, note)


def _start_watchdog(timeout_s: float | None, environ: MutableMapping[str, str]):
    from . import watchdog as _wd

    return _wd.active() or _wd.Watchdog(timeout_s, environ=environ).start()


def _reset_for_tests() -> None:
    global _result
    from . import watchdog as _wd

    with _lock:
        wd = _wd.active()
        if wd is not None:
            wd.stop()
        _result = None
