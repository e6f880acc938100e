"""Complete, atomic, self-verifying training checkpoints, durable when ``save()`` returns.

A save writes into a temporary directory (``torch.save`` straight into a
:class:`~npu_runtime.durable.DurableWriter`), writes the manifest, fsyncs the files and
the directory, renames the directory into place, updates ``latest``, fsyncs the parent
directory, and only then prunes. ``save()`` returns after all of that, on every rank.
``async_save()`` is the opt-in that returns a handle while the fsyncs, rename and
pruning finish on a thread. Loading walks back from the newest checkpoint until one
verifies. Layout and publishing: ``layout.py``; writing and checking files: ``durable.py``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from . import durable, layout, safeio, sharded_io
from . import exitguard as _exitguard
from . import health as _health
from . import rng as _rng
from . import watchdog as _watchdog
from .errors import CheckpointError
from .layout import LATEST, step_dirname  # noqa: F401 - re-exported for scripts and tests

log = logging.getLogger("npu_runtime")

FORMAT = "npu_runtime.checkpoint/1"
STATE_FILE = "state.pt"
#: how often loading lists the directory again when a checkpoint vanishes as it is read
_RELISTS = 10
#: how many skipped checkpoints get a warning each (the rest one summary line)
_WARN_EACH = 5


def _identity(path: str) -> tuple[int, int] | None:
    """Which directory ``path`` names now (device, inode), or None if none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
MANIFEST = "MANIFEST.json"
DCP_SUBDIR = "sharded"
#: a manifest larger than this is not one (a sharded manifest is ~100 bytes per file)
MANIFEST_MAX = 16 << 20


@dataclass
class ResumePoint:
    """Where to continue: ``step`` optimizer steps done, ``batch_in_epoch`` batches of
    ``epoch`` already consumed, plus any plain values passed to ``save``."""

    step: int
    epoch: int | None
    batch_in_epoch: int | None
    path: str
    extra: dict[str, Any] = field(default_factory=dict)


class SaveHandle(Future):
    """A background save from :meth:`CheckpointManager.async_save`. ``wait()`` (or
    ``result()``) blocks until the checkpoint is durable and returns its path, or raises
    the CheckpointError that stopped it. An error seen here is not raised again by the
    manager's next ``wait()``/``save()``."""

    observed = False

    def result(self, timeout: float | None = None) -> str:
        value = super().result(timeout)  # raises the save's error
        self.observed = True
        return value

    def wait(self, timeout: float | None = None) -> str:
        try:
            return self.result(timeout)
        except CheckpointError:
            self.observed = True
            raise


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


def _checksum_private(directory: str, name: str) -> tuple[int, int]:
    """(size, crc32) of a file DCP just wrote, made unwritable by group and others first:
    loading a sharded checkpoint trusts only files nobody else can change (a umask of
    002 would leave them group-writable)."""
    dfd = safeio.open_dir(directory)
    try:
        fd, st = safeio.open_regular(dfd, name, shown=os.path.join(directory, name))
    finally:
        os.close(dfd)
    try:
        if st.st_mode & 0o022:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o022)
        return st.st_size, durable.crc32_fd(fd, st.st_size)
    finally:
        os.close(fd)


def _dcp_exception() -> type[BaseException]:
    """torch.distributed.checkpoint's CheckpointException: a BaseException, so an
    ``except Exception`` lets it through."""
    try:
        from torch.distributed.checkpoint.api import CheckpointException
    except ImportError:  # pragma: no cover - every torch this runtime supports has it
        return Exception
    return CheckpointException


def _is_stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _files_under(root: str) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f != MANIFEST:
                out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def _dist():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist
    return None


def _agree(dist: Any, error: str | None) -> str | None:
    """All ranks learn the first rank's error (a collective: every rank must call it)."""
    if not dist:
        return error
    errors: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error)
    return next((e for e in errors if e is not None), None)


def _check_manifest(manifest: Any, mpath: str, step: int) -> dict[str, dict[str, Any]]:
    """The manifest's file table, or CheckpointError for anything malformed."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{mpath}: not a {FORMAT} manifest")
    if manifest.get("step") != step:
        raise CheckpointError(f"{mpath}: manifest step {manifest.get('step')!r} does not match the directory")
    files = manifest.get("files")
    if not isinstance(files, dict) or STATE_FILE not in files:
        raise CheckpointError(f"{mpath}: manifest lists no {STATE_FILE}")
    for rel, meta in files.items():
        if not isinstance(rel, str) or os.path.isabs(rel) or ".." in rel.split("/"):
            raise CheckpointError(f"{mpath}: bad file name {rel!r} in manifest")
        ok = (isinstance(meta, dict) and type(meta.get("size")) is int and meta["size"] >= 0
              and (type(meta.get("crc32")) is int or meta.get("check") == durable.ZIP_CRC))
        if not ok:
            raise CheckpointError(f"{mpath}: bad entry for {rel!r} in manifest: {meta!r}")
    return files


def _check_payload(payload: Any, spath: str) -> dict[str, Any]:
    if not (isinstance(payload, dict) and payload.get("format") == FORMAT and isinstance(payload.get("states"), dict)
            and isinstance(payload.get("extra", {}), dict) and isinstance(payload.get("rng"), list)
            and payload["rng"] and type(payload.get("step")) is int):
        raise CheckpointError(f"{spath}: not a {FORMAT} payload")
    return payload


# --------------------------------------------------------------------------- manager


class CheckpointManager:
    """Save and resume full training state.

    ``save(step, model=..., optimizer=..., scaler=..., scheduler=..., epoch=e,
    batch_in_epoch=b, **anything)``: objects with ``state_dict``/``load_state_dict`` are
    saved through them (DDP and torch.compile wrappers unwrapped), ``torch.Generator``
    objects by their state, anything else as a plain value returned in
    ``ResumePoint.extra``. RNG states of every rank are always included. When ``save``
    returns, on any rank, the checkpoint is durable: a kill at any later moment cannot
    lose it. ``async_save`` returns a :class:`SaveHandle` once the state is written and
    finishes making it durable on a thread.

    ``sharded=True`` writes model and optimizer with ``torch.distributed.checkpoint``
    (every rank writes its shards); the rest is written by rank 0.

    Pruning keeps the ``keep`` newest checkpoints that are known to be good (written by
    this manager, or verified by ``load_latest``); one that was never verified or failed
    verification never pushes a good one out.
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 3, *, sharded: bool = False,
                 verify: bool = True) -> None:
        if keep < 1:
            raise ValueError("keep must be >= 1")
        self.directory = os.fspath(directory)
        self.keep = keep
        self.sharded = sharded
        self.verify = verify
        self._good: set[str] = set()
        self._pending: SaveHandle | None = None
        self._counter = itertools.count()
        os.makedirs(self.directory, exist_ok=True)
        _register_for_exit(self)

    # ------------------------------------------------------------------ listing
    def checkpoints(self) -> list[tuple[int, str]]:
        """(step, path) of finished checkpoint directories, newest first (not verified)."""
        return [(step, os.path.join(self.directory, name)) for step, _g, name in layout.listing(self.directory)]

    def latest_pointer(self) -> str | None:
        return layout.read_latest(self.directory)

    def _tag(self) -> str:
        """A fresh suffix for this save's temporary names: random, so nobody can plant
        them in advance (they are created with O_EXCL / mkdir anyway)."""
        return f"{os.getpid()}-{next(self._counter)}-{secrets.token_hex(8)}"

    def _begin(self, tmp: str) -> None:
        """Rank 0: hold the directory's save lock; create the save's directory (never an
        existing one, never through a link), private to writing by this user."""
        layout.lock_for_saving(self.directory)
        os.mkdir(tmp, 0o755)
        if self.sharded:
            os.mkdir(os.path.join(tmp, DCP_SUBDIR), 0o755)

    # ------------------------------------------------------------------ saving
    def wait(self) -> None:
        """Block until a background save is durable and old checkpoints are removed;
        re-raise the save's error, if any."""
        self._wait_pending()
        layout.settle()

    def _wait_pending(self) -> None:
        handle, self._pending = self._pending, None
        if handle is not None and not handle.observed:
            handle.wait()

    def save(self, step: int, *, epoch: int | None = None, batch_in_epoch: int | None = None,
             **objects: Any) -> str:
        """Write a checkpoint for ``step``; returns its directory once it is durable."""
        return self._save(step, epoch, batch_in_epoch, objects, background=False).result()

    def async_save(self, step: int, *, epoch: int | None = None, batch_in_epoch: int | None = None,
                   **objects: Any) -> SaveHandle:
        """Like ``save``, but return once the state is written: flushing it to disk,
        publishing and pruning finish on a thread. ``handle.wait()`` (or the next
        ``save``/``load_latest``, or ``wait()``) blocks until it is durable; a pending
        save also completes at normal interpreter exit. In a distributed run the handle
        of rank 0 tracks the save (the other ranks' handles complete at once); with
        ``sharded=True`` the save is synchronous."""
        return self._save(step, epoch, batch_in_epoch, objects, background=not self.sharded)

    def _save(self, step: int, epoch: int | None, batch_in_epoch: int | None, objects: dict[str, Any],
              background: bool) -> SaveHandle:
        with _exitguard.paused():  # a finished job's last save is made durable before the exit guard acts
            return self._save_unguarded(step, epoch, batch_in_epoch, objects, background)

    def _save_unguarded(self, step: int, epoch: int | None, batch_in_epoch: int | None, objects: dict[str, Any],
                        background: bool) -> SaveHandle:
        _watchdog.beat()  # the runtime's own saves are signs of life; barriers are not
        _health.mark_interval("checkpoint")  # and no slow step: this interval holds a save
        self._wait_pending()
        dist = _dist()
        rank = dist.get_rank() if dist else 0
        what = f"checkpoint step {step}"
        tag = self._tag()
        tmp = os.path.join(self.directory, f"{layout.TMP_PREFIX}{step_dirname(step)}-{tag}")
        if dist and self.sharded:
            box = [tmp]
            dist.broadcast_object_list(box, src=0)  # every rank writes into rank 0's directory
            tmp = box[0]
        payload, sharded_state = self._payload(step, epoch, batch_in_epoch, objects)
        files: dict[str, dict[str, Any]] = {}
        error = None
        error = self._attempt(what, self._begin, tmp) if rank == 0 else None
        if self.sharded:
            error = _agree(dist, error)
            if error is None:
                files, error = self._write_shards(tmp, sharded_state, dist, what)
        handle = SaveHandle()
        if rank == 0 and error is None:
            error = self._attempt(what, self._write_state, tmp, payload, files, flush=not background)
            if error is None and background:
                threading.Thread(target=self._finish, args=(tmp, step, files, tag, handle),
                                 name="npu_runtime-checkpoint", daemon=False).start()
                self._pending = handle
            elif error is None:
                self._finish(tmp, step, files, tag, handle)
                if handle.exception() is not None:
                    error = str(handle.exception())
        if rank == 0 and error is not None and layout.holds_lock(self.directory):
            # leftovers; never without the lock: they may be another job's save in progress
            self._attempt(what, layout.prune, self.directory, self.keep, self._good.__contains__, tag)
            # and gone before the error reaches the script: a script that dies of it exits
            # at once, and a daemon removal thread would die with it (leaving .trash-*)
            layout.settle()
        # Every rank returns together, once rank 0's save is durable (or failed for all).
        error = _agree(dist, error)
        _watchdog.beat()
        if error is not None:
            raise CheckpointError(error)
        if not handle.done() and handle is not self._pending:
            handle.set_result(os.path.join(self.directory, step_dirname(step)))
        return handle

    def _attempt(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> str | None:
        """Run ``fn``; the message of the CheckpointError it amounts to, or None."""
        try:
            fn(*args, **kwargs)
        except (Exception, _dcp_exception()) as exc:  # noqa: BLE001 - every rank has to hear of it
            return str(exc if isinstance(exc, CheckpointError) else durable.write_failure(exc, what, self.directory))
        return None

    def _write_state(self, tmp: str, payload: dict[str, Any], files: dict[str, dict[str, Any]], *,
                     flush: bool) -> None:
        """``flush``: flush to disk while writing (a durable save); a background save
        returns as soon as the bytes are written and flushes them on its thread."""
        import torch

        writer = durable.DurableWriter(os.path.join(tmp, STATE_FILE), crc=not durable.torch_writes_crc(),
                                       flush_every=durable.FLUSH_EVERY if flush else 0)
        try:
            torch.save(payload, writer)
        except BaseException as exc:
            writer.abort()
            if writer.error is not None:
                raise writer.error from exc
            raise
        writer.close()
        entry: dict[str, Any] = {"size": writer.size}
        if writer.crc is not None:
            entry["crc32"] = writer.crc
        else:
            entry["check"] = durable.ZIP_CRC
        files[STATE_FILE] = entry

    def _write_shards(self, tmp: str, sharded_state: dict[str, Any], dist: Any,
                      what: str) -> tuple[dict[str, dict[str, Any]], str | None]:
        """torch.distributed.checkpoint writes every rank's shards (and fsyncs them); each
        rank checksums the files it wrote, and the tables are gathered."""
        import torch.distributed.checkpoint as dcp

        where = os.path.join(tmp, DCP_SUBDIR)
        error = self._attempt(what, dcp.save, sharded_state, storage_writer=sharded_io.writer(where))  # every rank alike
        if error is not None:
            return {}, error
        rank = dist.get_rank() if dist else 0
        mine: dict[str, dict[str, Any]] = {}

        def checksum_mine() -> None:
            for name in sorted(os.listdir(where)):
                owner = name.split("_")[2] if name.startswith("__") and name.count("_") >= 3 else "0"
                if owner == str(rank) or (rank == 0 and not owner.isdigit()):
                    size, crc = _checksum_private(where, name)
                    mine[f"{DCP_SUBDIR}/{name}"] = {"size": size, "crc32": crc}

        error = self._attempt(what, checksum_mine)
        tables: list[Any] = [(mine, error)]
        if dist:
            tables = [None] * dist.get_world_size()
            dist.all_gather_object(tables, (mine, error))
        files: dict[str, dict[str, Any]] = {}
        for table, err in tables:
            if err is not None:
                return {}, err
            files.update(table)
        missing = sorted(set(_files_under(tmp)) - set(files) - {STATE_FILE})
        if missing:
            return {}, f"{what}: sharded files nobody checksummed: {missing}"
        return files, None

    def _finish(self, tmp: str, step: int, files: dict[str, dict[str, Any]], tag: str, handle: SaveHandle) -> None:
        """Manifest; fsync files and directories (side by side); publish; ``latest``;
        fsync the parent; prune (rank 0). Sets ``handle``."""
        with _exitguard.paused():
            self._finish_unguarded(tmp, step, files, tag, handle)

    def _finish_unguarded(self, tmp: str, step: int, files: dict[str, dict[str, Any]], tag: str,
                          handle: SaveHandle) -> None:
        what = f"checkpoint step {step}"
        latest = None
        try:
            durable.write_text(os.path.join(tmp, MANIFEST),
                               json.dumps({"format": FORMAT, "step": step, "files": files}, indent=1, sort_keys=True))
            latest = layout.prepare_latest(self.directory, step_dirname(step), tag)
            own = [os.path.join(tmp, STATE_FILE), os.path.join(tmp, MANIFEST), latest]  # DCP synced its files
            durable.sync(own + [dirpath for dirpath, _dirs, _files in os.walk(tmp)])
            name = layout.publish(self.directory, tmp, step, tag)
            layout.install_latest(self.directory, latest)
            durable.fsync_dir(self.directory)  # the rename and `latest` together
        except Exception as exc:  # noqa: BLE001 - the handle carries it to the caller
            layout.prune(self.directory, self.keep, self._good.__contains__, tag)
            layout.settle()  # the failed save's .trash-* is gone before anyone hears of the failure
            log.error("npu_runtime: %s failed: %s", what, exc)
            handle.set_exception(exc if isinstance(exc, CheckpointError)
                                 else durable.write_failure(exc, what, self.directory))
            return
        self._good.add(name)
        try:
            layout.prune(self.directory, self.keep, self._good.__contains__, tag)
        except OSError as exc:  # the checkpoint is durable; an old one lingers
            log.warning("npu_runtime: pruning %s: %s", self.directory, exc)
        handle.set_result(os.path.join(self.directory, name))

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

    # ------------------------------------------------------------------ loading
    def verify_dir(self, path: str, *, check_data: bool | None = None) -> dict[str, Any]:
        """Check one checkpoint directory; returns its loaded payload or raises CheckpointError.

        Nothing in it is trusted: the directory and every file are opened without
        following links, every file must be a regular file of the manifest's size before
        a byte of it is read, and a sharded checkpoint (pickled DCP metadata) must belong
        to this user and be writable by nobody else (``safeio.check_private``)."""
        name = os.path.basename(os.path.normpath(path))
        key = layout.parse_name(name)
        if key is None:
            raise CheckpointError(f"{path}: not a checkpoint directory name")
        pfd = safeio.open_dir(os.path.dirname(os.path.normpath(path)) or ".")
        try:
            dfd = safeio.open_dir(name, dir_fd=pfd)  # a symlinked checkpoint directory is refused
        finally:
            os.close(pfd)
        try:
            return self._verify_open(dfd, path, key[0], self.verify if check_data is None else check_data)
        finally:
            os.close(dfd)

    def _verify_open(self, dfd: int, path: str, step: int, check_data: bool) -> dict[str, Any]:
        import torch

        mpath = os.path.join(path, MANIFEST)
        raw = safeio.read_small(dfd, MANIFEST, shown=mpath, max_size=MANIFEST_MAX)
        try:
            manifest = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise CheckpointError(f"{mpath}: unreadable manifest ({type(exc).__name__}: {exc})") from None
        files = _check_manifest(manifest, mpath, step)
        sharded = any(rel.startswith(DCP_SUBDIR + "/") for rel in files)
        if sharded:
            if f"{DCP_SUBDIR}/{sharded_io.METADATA}" not in files:
                raise CheckpointError(f"{mpath}: a sharded checkpoint whose manifest lists no metadata")
            safeio.check_private(os.fstat(dfd), path)
            sfd = safeio.open_dir(DCP_SUBDIR, dir_fd=dfd)
            try:
                safeio.check_private(os.fstat(sfd), os.path.join(path, DCP_SUBDIR))
            finally:
                os.close(sfd)
            sharded_files = [rel[len(DCP_SUBDIR) + 1:] for rel in files if rel.startswith(DCP_SUBDIR + "/")]
        # Every entry is a regular file of its size (and private, when sharded) before any is read.
        for rel, meta in files.items():
            fd, st = safeio.open_regular(dfd, rel, shown=os.path.join(path, rel), size=meta["size"])
            os.close(fd)
            if sharded:
                safeio.check_private(st, os.path.join(path, rel))
        if check_data:
            for rel, meta in files.items():
                fpath = os.path.join(path, rel)
                fd, _st = safeio.open_regular(dfd, rel, shown=fpath, size=meta["size"])
                try:
                    if "crc32" in meta:
                        try:
                            crc = durable.crc32_fd(fd, meta["size"])
                        except CheckpointError as exc:
                            raise CheckpointError(f"{fpath}: {exc}") from None
                        except OSError as exc:
                            raise CheckpointError(f"{fpath}: {exc}") from None
                        if crc != meta["crc32"]:
                            raise CheckpointError(f"{fpath}: crc32 mismatch (corrupt)")
                    else:
                        with os.fdopen(os.dup(fd), "rb") as fh:
                            durable.check_zip(fh, fpath)
                finally:
                    os.close(fd)
        spath = os.path.join(path, STATE_FILE)
        fd, _st = safeio.open_regular(dfd, STATE_FILE, shown=spath, size=files[STATE_FILE]["size"])
        try:
            with os.fdopen(fd, "rb") as fh:
                payload = torch.load(fh, map_location="cpu", weights_only=True)
        except Exception as exc:
            if "weights_only" in str(exc) or "Weights only" in str(exc):
                # Verified bytes that fail the safe unpickler hold an unsupported type:
                # every older checkpoint will too, so falling back would silently restart.
                raise CheckpointError(
                    f"{spath} holds a value torch.load(weights_only=True) refuses; pass only tensors, "
                    f"state_dicts and plain Python values to save(). {exc}") from exc
            raise CheckpointError(f"{spath}: cannot be loaded ({type(exc).__name__}: {exc})") from None
        payload = _check_payload(payload, spath)
        if payload["step"] != step:
            raise CheckpointError(f"{spath}: payload step {payload['step']} does not match the directory")
        if sharded:
            # DCP's metadata is a pickle: checked here (allow-list unpickler), so a bad one
            # is skipped like any corrupt checkpoint; DCP reads it again the same way.
            sharded_io.load_metadata(os.path.join(path, DCP_SUBDIR), sharded_files)
            payload["_sharded_files"] = sorted(sharded_files)
        return payload

    def _choose(self) -> tuple[str, dict[str, Any]] | None:
        """The newest checkpoint that verifies. A save running beside this load (in another
        process) renames and prunes directories while they are listed and read: when a
        checkpoint disappears or is replaced while it is read, or a newer one appears
        meanwhile, the directory is listed again, rather than settling for an older one."""
        rejected: set[tuple[str, tuple[int, int] | None]] = set()  # corrupt, as they stand
        chosen: tuple[str, dict[str, Any]] | None = None
        for _listing in range(_RELISTS):
            chosen, key, stale = None, (-1, -1), False
            for step, gen, name in layout.listing(self.directory):
                path = os.path.join(self.directory, name)
                identity = _identity(path)
                if (name, identity) in rejected:
                    continue
                try:
                    payload = self.verify_dir(path)
                except CheckpointError as exc:
                    if "weights_only" in str(exc):
                        raise
                    if identity is None or _identity(path) != identity:
                        stale = True  # renamed away (or replaced under the same name) meanwhile
                        break
                    rejected.add((name, identity))
                    if len(rejected) <= _WARN_EACH:
                        log.warning("npu_runtime: skipping checkpoint step %d: %s", step, exc)
                    continue
                chosen, key = (path, payload), (step, gen)
                break
            if stale:
                continue
            newer = [name for step, gen, name in layout.listing(self.directory)
                     if (step, gen) > key and (name, _identity(os.path.join(self.directory, name))) not in rejected]
            if not newer:
                break
        if len(rejected) > _WARN_EACH:
            log.warning("npu_runtime: skipped %d more directories with checkpoint names that are not good "
                        "checkpoints in %s", len(rejected) - _WARN_EACH, self.directory)
        if chosen is not None:
            self._good.add(os.path.basename(chosen[0]))
        return chosen

    def load_latest(self, **objects: Any) -> ResumePoint | None:
        """Restore ``objects`` (same names as in ``save``) and every RNG from the newest
        checkpoint that verifies. Returns None when there is none (fresh start)."""
        import torch

        self._wait_pending()
        dist = _dist()
        chosen = self._choose() if (dist is None or dist.get_rank() == 0) else None
        if dist:
            box = [chosen[0] if chosen else None]
            dist.broadcast_object_list(box, src=0)
            if box[0] is None:
                chosen = None
            elif chosen is None or chosen[0] != box[0]:
                chosen = (box[0], self.verify_dir(box[0], check_data=False))  # rank 0 checked the bytes
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
            self._load_sharded(path, objects, payload.get("_sharded_files", []))
        rank = dist.get_rank() if dist else 0
        rngs = payload["rng"]
        if len(rngs) != (dist.get_world_size() if dist else 1):
            log.warning("npu_runtime: checkpoint was written by %d ranks, now %d; RNG of rank %d restored "
                        "from rank %d", len(rngs), dist.get_world_size() if dist else 1, rank,
                        rank % len(rngs))
        _rng.restore(rngs[rank % len(rngs)])
        log.info("npu_runtime: resumed from %s (step %s)", path, payload["step"])
        _watchdog.beat()
        return ResumePoint(payload["step"], payload.get("epoch"), payload.get("batch_in_epoch"), path,
                           dict(payload.get("extra", {})))

    def _load_sharded(self, path: str, objects: dict[str, Any], files: list[str]) -> None:
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
        where = os.path.join(path, DCP_SUBDIR)
        try:
            dcp.load(state, storage_reader=sharded_io.reader(where, files), planner=sharded_io.planner())
        except CheckpointError:
            raise
        except (Exception, _dcp_exception()) as exc:  # noqa: BLE001 - DCP's own error is a BaseException
            raise CheckpointError(f"{where}: sharded state cannot be loaded ({type(exc).__name__}: {exc})") from None
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


_live: list[Any] = []


def _register_for_exit(mgr: CheckpointManager) -> None:
    import atexit
    import weakref

    if not _live:
        atexit.register(_wait_all)
    _live.append(weakref.ref(mgr))


def _wait_all() -> None:
    """At exit (after Python joined the non-daemon save threads): report failures."""
    with _exitguard.paused():
        _wait_all_unguarded()


def _wait_all_unguarded() -> None:
    for ref in _live:
        mgr = ref()
        if mgr is not None and mgr._pending is not None:
            try:
                mgr.wait()
            except Exception as exc:  # noqa: BLE001 - nothing left to raise to
                log.error("npu_runtime: background checkpoint save failed: %s", exc)
    # Pruned checkpoints (.trash-*) are removed on daemon threads, which die with the
    # process: an ordinary script with keep=1 left one behind in 6 of 8 runs.
    if not layout.settle(layout.EXIT_SETTLE_S):
        log.warning("npu_runtime: removing old checkpoints (.trash-*) took over %.0f s at exit; "
                    "the next save finishes it", layout.EXIT_SETTLE_S)
