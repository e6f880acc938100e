"""Read HCCL ranktable files (legacy ``group_list`` and ``"version": "1.0"``/``"1.2"``).

All values in a ranktable are strings. A scheduler may write the file while the job
starts, so :func:`load` polls until ``status`` is ``"completed"`` or a timeout passes.
The timeout is one budget per file and process: ``install()`` and a later
``init_distributed()`` share it instead of waiting twice. Parsing is pure
(:func:`parse`) and every error names the file and the JSON field.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import RanktableError

log = logging.getLogger("npu_runtime")

DEFAULT_FILENAME = "jobstart_hccl.json"
_monotonic = time.monotonic  # module-level so that tests can run the wait on a fake clock
_sleep = time.sleep


@dataclass(frozen=True)
class Device:
    rank: int
    device_id: int
    server_index: int
    server_id: str
    host_ip: str | None
    device_ip: str | None


@dataclass(frozen=True)
class Ranktable:
    path: str
    version: str  # "legacy", "1.0", "1.2", ...
    devices: tuple[Device, ...]  # sorted by rank

    @property
    def world_size(self) -> int:
        return len(self.devices)

    def server_devices(self, server_index: int) -> list[Device]:
        return [d for d in self.devices if d.server_index == server_index]

    def servers(self) -> list[tuple[str, str | None]]:
        """(server_id, host_ip) per server, in file order."""
        seen: dict[int, tuple[str, str | None]] = {}
        for d in self.devices:
            seen.setdefault(d.server_index, (d.server_id, d.host_ip))
        return [seen[k] for k in sorted(seen)]

    def without_device_ip(self) -> list[Device]:
        return [d for d in self.devices if not d.device_ip]

    def master_addr(self) -> str:
        d0 = self.devices[0]
        return d0.host_ip or d0.server_id


def resolve_path(path: str) -> str:
    """RANK_TABLE_FILE may name the JSON file or a directory holding jobstart_hccl.json."""
    if os.path.isdir(path):
        return os.path.join(path, DEFAULT_FILENAME)
    return path


def _int_field(value: Any, where: str, path: str, minimum: int | None = None) -> int:
    """An integer field through the runtime's one bounded parser (``bounds.py``)."""
    from .bounds import MAX_DIGITS, MAX_INT, BoundError, bounded_int, shown

    try:
        number = bounded_int(value, where, minimum=-MAX_INT, maximum=MAX_INT)
    except BoundError:
        number = None
    if number is None:
        raise RanktableError(f"ranktable {path}: field {where} must be an integer string of at most {MAX_DIGITS} "
                             f"digits, got {shown(value)}")
    if minimum is not None and number < minimum:
        raise RanktableError(f"ranktable {path}: field {where} must be >= {minimum}, got {value!r}")
    return number


def _device_ip(dev: Mapping[str, Any], where: str, path: str) -> str | None:
    """A device's RoCE address, or None when absent or empty. Whether a job can do without
    one (a single server) is the launch's question: ``env`` asks it."""
    value = dev.get("device_ip")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise RanktableError(f"ranktable {path}: field {where}.device_ip must be a string, got {value!r}")
    return value


def _list_field(obj: Mapping[str, Any], key: str, where: str, path: str) -> list:
    if key not in obj:
        raise RanktableError(f"ranktable {path}: missing field {where}{key}")
    value = obj[key]
    if not isinstance(value, list):
        raise RanktableError(f"ranktable {path}: field {where}{key} must be a list, got {type(value).__name__}")
    return value


def _obj(value: Any, where: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise RanktableError(f"ranktable {path}: field {where} must be an object, got {type(value).__name__}")
    return value


def _str_field(obj: Mapping[str, Any], key: str, where: str, path: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise RanktableError(f"ranktable {path}: missing field {where}.{key}")
        return None
    if not isinstance(value, str) or not value:
        raise RanktableError(f"ranktable {path}: field {where}.{key} must be a non-empty string, got {value!r}")
    return value


def parse(doc: Any, path: str = "<ranktable>") -> Ranktable:
    """Parse a loaded ranktable document. Raises RanktableError naming the bad field."""
    doc = _obj(doc, "<root>", path)
    status = doc.get("status")
    if status != "completed":
        raise RanktableError(f"ranktable {path}: field status is {status!r}, expected 'completed'")
    if "server_list" in doc:
        devices, version = _parse_server_list(doc, path), str(doc.get("version", "1.0"))
    elif "group_list" in doc:
        devices, version = _parse_group_list(doc, path), "legacy"
    else:
        raise RanktableError(f"ranktable {path}: has neither server_list (version 1.0) nor group_list (legacy)")
    if not devices:
        raise RanktableError(f"ranktable {path}: lists no devices")
    ranks = sorted(d.rank for d in devices)
    if ranks != list(range(len(devices))):
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        detail = f"duplicate rank_id {dup}" if dup else f"rank_id values {ranks} are not 0..{len(devices) - 1}"
        raise RanktableError(f"ranktable {path}: {detail}")
    return Ranktable(path=path, version=version, devices=tuple(sorted(devices, key=lambda d: d.rank)))


def _parse_server_list(doc: Mapping[str, Any], path: str) -> list[Device]:
    out: list[Device] = []
    servers = _list_field(doc, "server_list", "", path)
    if "server_count" in doc:
        count = _int_field(doc["server_count"], "server_count", path)
        if count != len(servers):
            raise RanktableError(
                f"ranktable {path}: field server_count is {count} but server_list has {len(servers)} entries"
            )
    for si, server in enumerate(servers):
        where = f"server_list[{si}]"
        server = _obj(server, where, path)
        server_id = _str_field(server, "server_id", where, path)
        host_ip = _str_field(server, "host_ip", where, path, required=False)
        for di, dev in enumerate(_list_field(server, "device", where + ".", path)):
            dwhere = f"{where}.device[{di}]"
            dev = _obj(dev, dwhere, path)
            if "rank_id" not in dev:
                raise RanktableError(f"ranktable {path}: missing field {dwhere}.rank_id")
            if "device_id" not in dev:
                raise RanktableError(f"ranktable {path}: missing field {dwhere}.device_id")
            out.append(
                Device(
                    rank=_int_field(dev["rank_id"], dwhere + ".rank_id", path, minimum=0),
                    device_id=_int_field(dev["device_id"], dwhere + ".device_id", path, minimum=0),
                    server_index=si,
                    server_id=server_id,  # type: ignore[arg-type]
                    host_ip=host_ip,
                    device_ip=_device_ip(dev, dwhere, path),
                )
            )
    return out


def _parse_group_list(doc: Mapping[str, Any], path: str) -> list[Device]:
    # Legacy format has no rank ids: ranks follow list order across groups and instances.
    out: list[Device] = []
    server_index = 0
    for gi, group in enumerate(_list_field(doc, "group_list", "", path)):
        gwhere = f"group_list[{gi}]"
        group = _obj(group, gwhere, path)
        for ii, inst in enumerate(_list_field(group, "instance_list", gwhere + ".", path)):
            iwhere = f"{gwhere}.instance_list[{ii}]"
            inst = _obj(inst, iwhere, path)
            server_id = _str_field(inst, "server_id", iwhere, path)
            for di, dev in enumerate(_list_field(inst, "devices", iwhere + ".", path)):
                dwhere = f"{iwhere}.devices[{di}]"
                dev = _obj(dev, dwhere, path)
                if "device_id" not in dev:
                    raise RanktableError(f"ranktable {path}: missing field {dwhere}.device_id")
                out.append(
                    Device(
                        rank=len(out),
                        device_id=_int_field(dev["device_id"], dwhere + ".device_id", path, minimum=0),
                        server_index=server_index,
                        server_id=server_id,  # type: ignore[arg-type]
                        host_ip=None,
                        device_ip=_device_ip(dev, dwhere, path),
                    )
                )
            server_index += 1
    # Several instances (pods) may sit on one server: merge them by server_id so local
    # ranks count per host, not per pod.
    first_index: dict[str, int] = {}
    merged = []
    for d in out:
        idx = first_index.setdefault(d.server_id, len(first_index))
        merged.append(Device(d.rank, d.device_id, idx, d.server_id, d.host_ip, d.device_ip))
    return merged


_deadlines: dict[str, float] = {}
_deadlines_lock = threading.Lock()


def _deadline(path: str, timeout_s: float) -> float:
    """The first wait for ``path`` in this process sets the deadline; later waits share it."""
    with _deadlines_lock:
        mine = _monotonic() + timeout_s
        deadline = min(_deadlines.get(path, mine), mine)
        _deadlines[path] = deadline
        return deadline


def _read(path: str) -> Any:
    """Parse the file, never blocking: a FIFO or device would make open() wait forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
            raise RanktableError(f"ranktable {path} (RANK_TABLE_FILE) is {kind}, not a JSON file")
        return json.loads(fh.read().decode("utf-8"))


def load(path: str, timeout_s: float = 300.0, poll_s: float = 0.5) -> Ranktable:
    """Read and parse a ranktable, waiting up to ``timeout_s`` for status 'completed'.

    A missing file, half-written JSON or a non-'completed' status are retried until the
    deadline; a structurally bad 'completed' file or a file that is not a regular file
    fails at once. The deadline is shared by every call for the same file in a process.
    """
    path = resolve_path(path)
    deadline = _deadline(path, timeout_s)
    while True:
        reason = None
        try:
            doc = _read(path)
        except RanktableError:
            raise
        except FileNotFoundError:
            reason = "file does not exist"
        except RecursionError:
            reason = "cannot be read as JSON (nested too deeply)"
        except (OSError, ValueError) as exc:
            reason = f"cannot be read as JSON ({exc})"
        else:
            if isinstance(doc, dict) and doc.get("status") != "completed":
                reason = f"field status is {doc.get('status')!r}, not 'completed'"
            else:
                return parse(doc, path)
        if _monotonic() >= deadline:
            raise RanktableError(f"ranktable {path} (RANK_TABLE_FILE): {reason} after waiting {timeout_s:g} s")
        _sleep(min(poll_s, max(0.0, deadline - _monotonic())))


def _new_lock_in_child() -> None:
    global _deadlines_lock
    _deadlines_lock = threading.Lock()  # another thread may have held it at fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def find_local_server(table: Ranktable, host_ids: Sequence[str]) -> int | None:
    """Index of the first server whose server_id or host_ip is one of ``host_ids``."""
    ids = set(host_ids)
    for d in table.devices:
        if d.server_id in ids or (d.host_ip is not None and d.host_ip in ids):
            return d.server_index
    return None
