"""Complete, atomic, self-verifying training checkpoints.

Layout under ``directory``::

    step-0000000100/            one complete checkpoint (never partially visible)
        state.pt                torch.save of the payload (model, optimizer, ..., RNG, counters)
        MANIFEST.json           written last: format, step, size and crc32 of every file
        (sharded mode: the torch.distributed.checkpoint files of model/optimizer too)
    latest                      text file naming the newest step directory
    .tmp-step-...               a save in progress (or one killed mid-way; cleaned later)

A save writes into a temporary directory, computes the checksums, fsyncs, renames the
directory into place, updates ``latest`` atomically and only then prunes to ``keep``.
Loading walks back from the highest step until a checkpoint verifies.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import mmap
import os
import re
import shutil
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import rng as _rng
from .errors import CheckpointError

log = logging.getLogger("npu_runtime")

FORMAT = "npu_runtime.checkpoint/1"
STATE_FILE = "state.pt"
MANIFEST = "MANIFEST.json"
LATEST = "latest"
DCP_SUBDIR = "sharded"
_STEP_RE = re.compile(r"^step-(\d+)$")
_TMP_PREFIX = ".tmp-"


@dataclass
class ResumePoint:
    """Where to continue: ``step`` optimizer steps done, ``batch_in_epoch`` batches of
    ``epoch`` already consumed, plus any plain values passed to ``save``."""

    step: int
    epoch: int | None
    batch_in_epoch: int | None
    path: str
    extra: dict[str, Any] = field(default_factory=dict)


def step_dirname(step: int) -> str:
    return f"step-{step:010d}"


# --------------------------------------------------------------------------- helpers


def _unwrap(obj: Any) -> Any:
    """DDP/DataParallel ``.module`` and torch.compile ``._orig_mod`` wrappers."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    while True:
        if isinstance(obj, (DataParallel, DistributedDataParallel)):
            obj = obj.module
        elif hasattr(obj, "_orig_mod") and hasattr(obj, "state_dict"):
            obj = obj._orig_mod
        else:
            return obj


def _is_stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _fsync_path(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _crc32_file(path: str) -> tuple[int, int]:
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return size, zlib.crc32(mm)  # zlib releases the GIL on large buffers


def _files_under(root: str) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f != MANIFEST:
                out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def _write_atomic_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _dist():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist
    return None


# --------------------------------------------------------------------------- manager


class CheckpointManager:
    """Save and resume full training state.

    ``save(step, model=..., optimizer=..., scaler=..., scheduler=..., epoch=e,
    batch_in_epoch=b, **anything)``: objects with ``state_dict``/``load_state_dict`` are
    saved through them (DDP and torch.compile wrappers unwrapped), ``torch.Generator``
    objects by their state, anything else as a plain value returned in
    ``ResumePoint.extra``. RNG states of every rank are always included.

    ``background=True`` (default) returns from ``save`` once the state is serialised;
    checksum, fsync, rename, ``latest`` and pruning finish on a thread (``wait()``
    blocks on it; the next ``save`` and interpreter exit wait too). Until then the
    previous checkpoint stays the newest complete one.

    ``sharded=True`` writes model and optimizer with ``torch.distributed.checkpoint``
    (every rank writes its shards); the rest is written by rank 0.
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 3, *, background: bool = True,
                 sharded: bool = False, verify: bool = True) -> None:
        if keep < 1:
            raise ValueError("keep must be >= 1")
        self.directory = os.fspath(directory)
        self.keep = keep
        self.background = background and not sharded
        self.sharded = sharded
        self.verify = verify
        self._pending: threading.Thread | None = None
        self._pending_error: BaseException | None = None
        self._counter = itertools.count()
        os.makedirs(self.directory, exist_ok=True)
        _register_for_exit(self)

    # ------------------------------------------------------------------ listing
    def checkpoints(self) -> list[tuple[int, str]]:
        """(step, path) of finished checkpoint directories, newest first (not verified)."""
        out = []
        for name in os.listdir(self.directory):
            m = _STEP_RE.match(name)
            if m and os.path.isdir(os.path.join(self.directory, name)):
                out.append((int(m.group(1)), os.path.join(self.directory, name)))
        return sorted(out, reverse=True)

    def latest_pointer(self) -> str | None:
        try:
            with open(os.path.join(self.directory, LATEST), encoding="utf-8") as fh:
                return fh.read().strip() or None
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ saving
    def wait(self) -> None:
        """Block until a background save is durable; re-raise its error, if any."""
        t, self._pending = self._pending, None
        if t is not None:
            t.join()
        err, self._pending_error = self._pending_error, None
        if err is not None:
            raise CheckpointError(f"background checkpoint save failed: {err}") from err

    def save(self, step: int, *, epoch: int | None = None, batch_in_epoch: int | None = None,
             **objects: Any) -> str:
        """Write a checkpoint for ``step``; returns its final directory path."""
        from . import watchdog

        self.wait()
        dist = _dist()
        rank = dist.get_rank() if dist else 0
        with watchdog.paused_active():
            if dist:
                dist.barrier()
            payload, sharded_state = self._payload(step, epoch, batch_in_epoch, objects)
            final = os.path.join(self.directory, step_dirname(step))
            if self.sharded:
                tmp = os.path.join(self.directory, f"{_TMP_PREFIX}{step_dirname(step)}-sharded")
                if rank == 0:
                    shutil.rmtree(tmp, ignore_errors=True)
                    os.makedirs(tmp)
                if dist:
                    dist.barrier()
                import torch.distributed.checkpoint as dcp

                dcp.save(sharded_state, checkpoint_id=os.path.join(tmp, DCP_SUBDIR))
                if dist:
                    dist.barrier()
            else:
                tmp = os.path.join(self.directory,
                                   f"{_TMP_PREFIX}{step_dirname(step)}-{os.getpid()}-{next(self._counter)}")
                if rank == 0:
                    os.makedirs(tmp)
            if rank == 0:
                import torch

                torch.save(payload, os.path.join(tmp, STATE_FILE))
                if self.background:
                    self._pending = threading.Thread(target=self._finalize_bg, args=(tmp, final, step),
                                                     name="npu_runtime-checkpoint", daemon=False)
                    self._pending.start()
                else:
                    self._finalize(tmp, final, step)
            if dist:
                dist.barrier()
        return final

    def _payload(self, step: int, epoch: int | None, batch_in_epoch: int | None,
                 objects: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        import torch

        states: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        sharded_state: dict[str, Any] = {}
        model = _unwrap(objects.get("model")) if "model" in objects else None
        for name, obj in objects.items():
            if self.sharded and name in ("model", "optimizer"):
                continue
            if isinstance(obj, torch.Generator):
                states[name] = obj.get_state()
            elif _is_stateful(obj):
                states[name] = _unwrap(obj).state_dict()
            else:
                extra[name] = obj
        if self.sharded:
            if model is None:
                raise CheckpointError("sharded=True needs model= (optimizer= optional)")
            from torch.distributed.checkpoint.state_dict import get_state_dict

            opt = objects.get("optimizer")
            msd, osd = get_state_dict(model, [opt] if opt is not None else [])
            sharded_state["model"] = msd
            if opt is not None:
                sharded_state["optimizer"] = osd
        rng_state = _rng.capture()
        dist = _dist()
        if dist:
            gathered: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, rng_state)
            rng_states = gathered
        else:
            rng_states = [rng_state]
        payload = {
            "format": FORMAT,
            "step": int(step),
            "epoch": epoch,
            "batch_in_epoch": batch_in_epoch,
            "states": states,
            "extra": extra,
            "rng": rng_states,
            "world_size": len(rng_states),
            "sharded": sorted(sharded_state),
            "time": time.time(),
        }
        return payload, sharded_state

    def _finalize_bg(self, tmp: str, final: str, step: int) -> None:
        try:
            self._finalize(tmp, final, step)
        except BaseException as exc:  # noqa: BLE001 - surfaced by wait() on the caller thread
            log.error("npu_runtime: checkpoint step %d failed: %s", step, exc)
            self._pending_error = exc

    def _finalize(self, tmp: str, final: str, step: int) -> None:
        files = {}
        for rel in _files_under(tmp):
            size, crc = _crc32_file(os.path.join(tmp, rel))
            files[rel] = {"size": size, "crc32": crc}
        manifest = {"format": FORMAT, "step": step, "files": files}
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        for rel in files:
            _fsync_path(os.path.join(tmp, rel))
        for dirpath, _dirs, _files in os.walk(tmp):
            _fsync_path(dirpath, directory=True)
        trash = None
        if os.path.exists(final):  # re-saving a step (e.g. after a resume): swap, then delete
            trash = os.path.join(self.directory, f"{_TMP_PREFIX}old-{os.path.basename(final)}-{os.getpid()}")
            os.replace(final, trash)
        os.replace(tmp, final)
        _fsync_path(self.directory, directory=True)
        _write_atomic_text(os.path.join(self.directory, LATEST), os.path.basename(final) + "\n")
        _fsync_path(self.directory, directory=True)
        if trash:
            shutil.rmtree(trash, ignore_errors=True)
        self._prune(keep_tmp=None)

    def _prune(self, keep_tmp: str | None) -> None:
        for _step, path in self.checkpoints()[self.keep:]:
            shutil.rmtree(path, ignore_errors=True)
        for name in os.listdir(self.directory):
            if name.startswith(_TMP_PREFIX) and os.path.join(self.directory, name) != keep_tmp:
                full = os.path.join(self.directory, name)
                if os.path.isdir(full):
                    shutil.rmtree(full, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.remove(full)

    # ------------------------------------------------------------------ loading
    def verify_dir(self, path: str) -> dict[str, Any]:
        """Check one checkpoint directory; returns its loaded payload or raises CheckpointError."""
        import torch

        mpath = os.path.join(path, MANIFEST)
        try:
            with open(mpath, encoding="utf-8") as fh:
                manifest = json.load(fh)
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{mpath}: unreadable manifest ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(
                manifest.get("files"), dict) or STATE_FILE not in manifest["files"]:
            raise CheckpointError(f"{mpath}: not a {FORMAT} manifest")
        if self.verify:
            for rel, meta in manifest["files"].items():
                fpath = os.path.join(path, rel)
                try:
                    size, crc = _crc32_file(fpath)
                except OSError as exc:
                    raise CheckpointError(f"{fpath}: {exc}") from None
                if size != meta.get("size"):
                    raise CheckpointError(f"{fpath}: size {size} != {meta.get('size')} in manifest (truncated?)")
                if crc != meta.get("crc32"):
                    raise CheckpointError(f"{fpath}: crc32 mismatch (corrupt)")
        spath = os.path.join(path, STATE_FILE)
        try:
            payload = torch.load(spath, map_location="cpu", weights_only=True)
        except Exception as exc:
            if "weights_only" in str(exc) or "Weights only" in str(exc):
                # Verified bytes that fail the safe unpickler hold an unsupported type:
                # every older checkpoint will too, so falling back would silently restart.
                raise CheckpointError(
                    f"{spath} holds a value torch.load(weights_only=True) refuses; pass only tensors, "
                    f"state_dicts and plain Python values to save(). {exc}") from exc
            raise CheckpointError(f"{spath}: cannot be loaded ({type(exc).__name__}: {exc})") from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise CheckpointError(f"{spath}: not a {FORMAT} payload")
        return payload

    def _choose(self) -> tuple[str, dict[str, Any]] | None:
        for step, path in self.checkpoints():
            try:
                payload = self.verify_dir(path)
            except CheckpointError as exc:
                if "weights_only" in str(exc):
                    raise
                log.warning("npu_runtime: skipping checkpoint step %d: %s", step, exc)
                continue
            return path, payload
        return None

    def load_latest(self, **objects: Any) -> ResumePoint | None:
        """Restore ``objects`` (same names as in ``save``) and every RNG from the newest
        checkpoint that verifies. Returns None when there is none (fresh start)."""
        import torch

        self.wait()
        dist = _dist()
        chosen = self._choose() if (dist is None or dist.get_rank() == 0) else None
        if dist:
            box = [chosen[0] if chosen else None]
            dist.broadcast_object_list(box, src=0)
            if box[0] is None:
                chosen = None
            elif chosen is None or chosen[0] != box[0]:
                chosen = (box[0], self.verify_dir(box[0]))
        if chosen is None:
            return None
        path, payload = chosen
        states = payload["states"]
        for name, obj in objects.items():
            if self.sharded and name in ("model", "optimizer"):
                continue
            if name in states:
                if isinstance(obj, torch.Generator):
                    obj.set_state(states[name])
                elif _is_stateful(obj):
                    _unwrap(obj).load_state_dict(states[name])
                else:
                    log.warning("npu_runtime: %r was saved with state but the object passed has no load_state_dict",
                                name)
            elif _is_stateful(obj) or isinstance(obj, torch.Generator):
                log.warning("npu_runtime: checkpoint %s has no state for %r; left as is", path, name)
        if self.sharded:
            self._load_sharded(path, objects)
        rank = dist.get_rank() if dist else 0
        rngs = payload["rng"]
        if len(rngs) != (dist.get_world_size() if dist else 1):
            log.warning("npu_runtime: checkpoint was written by %d ranks, now %d; RNG of rank %d restored "
                        "from rank %d", len(rngs), dist.get_world_size() if dist else 1, rank,
                        rank % len(rngs))
        _rng.restore(rngs[rank % len(rngs)])
        log.info("npu_runtime: resumed from %s (step %s)", path, payload["step"])
        return ResumePoint(payload["step"], payload.get("epoch"), payload.get("batch_in_epoch"), path,
                           dict(payload.get("extra", {})))

    def _load_sharded(self, path: str, objects: dict[str, Any]) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import (
            get_state_dict,
            set_state_dict,
        )

        model = _unwrap(objects["model"])
        opt = objects.get("optimizer")
        msd, osd = get_state_dict(model, [opt] if opt is not None else [])
        state = {"model": msd}
        if opt is not None:
            state["optimizer"] = osd
        dcp.load(state, checkpoint_id=os.path.join(path, DCP_SUBDIR))
        set_state_dict(model, [opt] if opt is not None else [], model_state_dict=state["model"],
                       optim_state_dict=state.get("optimizer", {}))


# --------------------------------------------------------------------------- helpers for loops


def resume_batches(iterable: Iterable[Any], skip: int) -> Iterator[Any]:
    """Iterate ``iterable`` from item ``skip`` on, for resuming mid-epoch.

    The skipped items are produced and dropped (so data-loading randomness runs as in
    the original pass), then every RNG is put back to its state from before the skip,
    so training continues exactly where the checkpoint left it. The order of the epoch
    must depend only on the epoch (``DistributedSampler.set_epoch`` or a sampler
    generator re-seeded per epoch), not on the global RNG at the time ``iter`` is called.
    """
    if skip <= 0:
        yield from iterable
        return
    snapshot = _rng.capture()
    it = iter(iterable)
    for _ in range(skip):
        try:
            next(it)
        except StopIteration:
            _rng.restore(snapshot)
            return
    _rng.restore(snapshot)
    yield from it


_live: list[CheckpointManager] = []


def _register_for_exit(mgr: CheckpointManager) -> None:
    import atexit
    import weakref

    if not _live:
        atexit.register(_wait_all)
    _live.append(weakref.ref(mgr))  # type: ignore[arg-type]


def _wait_all() -> None:
    for ref in _live:
        mgr = ref()  # type: ignore[operator]
        if mgr is not None and mgr._pending is not None:
            with contextlib.suppress(Exception):
                mgr.wait()
