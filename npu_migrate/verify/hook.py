"""Runs inside each twin (started as ``python -m npu_migrate.verify.entry SCRIPT ARGS...``).

It records, without the user adding anything, per optimizer step: every tensor
``backward()`` is called on (the losses), the global gradient norm, a digest of
the optimizer's parameters before and after the step, the GradScaler's scale
and whether the scaler skipped the step, and on which devices the parameters and
losses live; plus the step count at every ``torch.save`` (the checkpoints a
resume can start from). It stops the script cleanly once it has done its steps:
at the next ``backward()`` (so that whatever the script does after a step, an
epoch-end checkpoint for example, still runs), by raising :class:`VerifyStop`,
which only this wrapper catches.

Settings come from the environment (set by npu_migrate/verify/twins.py):

* ``NPU_MIGRATE_VERIFY_OUT``: directory for ``rank<R>.json`` and ``rank<R>.npz``;
* ``NPU_MIGRATE_VERIFY_STEPS``: stop after this many (global) optimizer steps;
* ``NPU_MIGRATE_VERIFY_ALIGN``: directory of an earlier run's records: the first
  step's parameters are looked up there to find which global step this (restarted)
  run begins with; where they match none (a restore that is not exact),
  ``NPU_MIGRATE_VERIFY_RESUMED_AFTER`` (the step the first run stopped after) is
  taken, and ``aligned`` is false;
* ``NPU_MIGRATE_VERIFY_CUDA_ON_NPU=1``: the reference twin, the original source on the
  emulated NPU (npu_migrate/verify/cuda_on_npu.py);
* ``NPU_MIGRATE_VERIFY_CUDA_ON_CPU=1``: the retargeted CPU reference (``--reference
  cpu-retarget``, npu_migrate/verify/cuda_on_cpu.py);
* ``NPU_MIGRATE_VERIFY_SEED``: seeds torch, random and numpy before the script runs
  (and in each process the script starts itself, npu_migrate/verify/spawned.py);
* ``NPU_MIGRATE_VERIFY_DEVICES``: the CPU-retarget reference's ``torch.cuda.device_count()``;
* ``NPU_MIGRATE_VERIFY_SNAPSHOT``: (one process only) a directory for a copy of the twin's
  project copy (``NPU_MIGRATE_VERIFY_ROOT``) as a run stopped after step k would leave it:
  taken at the first ``backward()`` after a step after which the script saved (where a
  stop run would be stopped), the latest one kept; with it, at the final stop, a listing
  of the tree (``tree-at-stop.json``) shows verify whether the script writes while it
  unwinds (then a snapshot is not what a stop run leaves, and verify runs one instead).

This module imports torch; the CLI process never imports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import traceback

ENV_OUT = "NPU_MIGRATE_VERIFY_OUT"
ENV_STEPS = "NPU_MIGRATE_VERIFY_STEPS"
ENV_ALIGN = "NPU_MIGRATE_VERIFY_ALIGN"
ENV_CPU = "NPU_MIGRATE_VERIFY_CUDA_ON_CPU"
ENV_REFERENCE = "NPU_MIGRATE_VERIFY_CUDA_ON_NPU"
#: the twin's copy of the project: a crash is reported at the last frame inside it
ENV_ROOT = "NPU_MIGRATE_VERIFY_ROOT"
#: a rendezvous port of this run's own (not under torchrun): a script's fixed one
#: (``MASTER_PORT = "12355"``, ``tcp://localhost:58472``) is replaced by it, so that
#: both twins can run at the same time
ENV_PORT = "NPU_MIGRATE_VERIFY_PORT"
ENV_SEED = "NPU_MIGRATE_VERIFY_SEED"
ENV_RESUMED_AFTER = "NPU_MIGRATE_VERIFY_RESUMED_AFTER"
#: The CPU-retarget reference's torch.cuda.device_count() (the migrated twin's is the emulator's device count).
ENV_DEVICES = "NPU_MIGRATE_VERIFY_DEVICES"
ENV_SNAPSHOT = "NPU_MIGRATE_VERIFY_SNAPSHOT"
#: A tree larger than this is not snapshotted (verify runs a stop run instead).
SNAPSHOT_LIMIT = 256 * 1024 * 1024
TREE_AT_STOP = "tree-at-stop.json"
#: Parameters kept for every step (for the element-wise metrics) up to this many
#: elements; larger models keep the last step's only.
KEEP_EVERY_STEP = 2_000_000


def _local(tensor):
    """A DTensor's (FSDP2, tensor parallel) shard on this rank; any other tensor as it is.
    Each rank records its own shard: both twins shard alike, rank by rank."""
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


class StepCountError(Exception):
    """The script's steps cannot be counted (hand-written updates, then an optimizer)."""


class VerifyStop(BaseException):
    """Raised at the first backward() after the last step; caught by :func:`main` only."""


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


class Recorder:
    def __init__(self, torch, out: str, limit: int, align: str | None, rank: int | None = None) -> None:
        self.torch = torch
        self.out = out
        self.limit = limit
        #: a process started by torch.multiprocessing.spawn learns its rank from its
        #: spawn index; a process group that is up when the first step is taken wins
        self.rank = _rank() if rank is None else rank
        self._rank_fixed = False
        self.pid = os.getpid()
        #: this process started the script's own processes (torch.multiprocessing.spawn):
        #: they record the steps; this one writes launcher.json, not a rank file
        self.launcher = False
        self.steps: list[dict] = []
        self.pending_losses: list[dict] = []
        self.saves: list[int] = []
        self.autocast: list[list] = []
        self.offset: int | None = 0
        self.aligned = True
        self.resumed_after = int(os.environ.get(ENV_RESUMED_AFTER, "0"))
        self.align_digests: list[str] | None = None
        self._align_dir = align
        if align:
            self.offset = None  # found at the first step
        self.params: dict[int, object] = {}
        self.status = "running"
        self.error: str | None = None
        #: where the script crashed: the last frame in the project's own files ("train.py:43 model.cuda()")
        self.frame: str | None = None
        self._in_scaler_step = False
        self._stepped_in_scaler = False
        self._optimizers: list = []
        self.last_scaled: tuple | None = None
        #: the code paths the run took (docs/verify.md, "Which paths each twin took")
        self.paths: dict = {"dataloaders": [], "process_group": None, "collectives": {}, "wrappers": [],
                            "attention": []}
        self.step_autocast: list = []
        #: the total norm clip_grad_norm_ measured (before clipping) since the last step
        self.pending_clip: float | None = None
        #: where snapshots of the project copy go (ENV_SNAPSHOT), and the step of the last one
        self.snapshot_dir = os.environ.get(ENV_SNAPSHOT) or None
        self._snapped: int | None = None
        #: a torch.optim optimizer was built in this process (before the first backward:
        #: steps are optimizer steps); without one the script updates its parameters by hand
        #: and each backward() is a step (``manual``, decided at the first backward)
        self.optimizer_built = False
        self.manual: bool | None = None
        self._manual_open: tuple | None = None  # (record, params) of the step whose update is under way

    # -- what the hooks record ---------------------------------------------------------

    @property
    def global_done(self) -> int:
        return max(self.offset or 0, 0) + len(self.steps)

    def _params_of(self, optimizer) -> list:
        return [p for group in optimizer.param_groups for p in group["params"]]

    def digest(self, params) -> str:
        torch = self.torch
        h = hashlib.sha256()
        for p in params:
            t = _local(p.detach())
            if t.device.type != "cpu":
                t = t.cpu()
            h.update(str(t.dtype).encode())
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:20]

    def grad_norm(self, params) -> float | None:
        torch = self.torch
        total = 0.0
        seen = False
        for p in params:
            g = _local(p.grad) if p.grad is not None else None
            if g is None:
                continue
            seen = True
            g = g.detach()
            if g.is_sparse:
                g = g.coalesce().values()
            total += float(g.cpu().to(torch.float64).pow(2).sum())
        return math.sqrt(total) if seen else None

    @staticmethod
    def devices(params) -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in params:
            counts[p.device.type] = counts.get(p.device.type, 0) + 1
        return counts

    def touched(self, params) -> list[str]:
        """Device types of the parameters, their gradients and the step's losses."""
        kinds = {p.device.type for p in params}
        kinds |= {p.grad.device.type for p in params if p.grad is not None}
        kinds |= {loss["device"] for loss in self.pending_losses}
        return sorted(kinds)

    def take_clip(self) -> float | None:
        clip, self.pending_clip = self.pending_clip, None
        return clip

    def take_autocast(self) -> list:
        """The autocast contexts entered since the last step ([device, dtype, enabled])."""
        entered, self.step_autocast = self.step_autocast, []
        return entered

    def on_autocast(self, entry: list) -> None:
        if entry not in self.step_autocast:
            self.step_autocast.append(entry)
        if entry not in self.autocast:
            self.autocast.append(entry)

    def on_dataloader(self, loader) -> None:
        sampler = getattr(loader, "sampler", None)
        batch_sampler = getattr(loader, "batch_sampler", None)
        entry = {
            "sampler": type(sampler).__name__ if sampler is not None else None,
            "shuffle": type(sampler).__name__ == "RandomSampler" or bool(getattr(sampler, "shuffle", False)),
            "batch_sampler": type(batch_sampler).__name__ if batch_sampler is not None else None,
            "batch_size": getattr(loader, "batch_size", None),
            "drop_last": bool(getattr(loader, "drop_last", False)),
            "num_workers": getattr(loader, "num_workers", 0),
            "generator": getattr(loader, "generator", None) is not None,
            "pin_memory": bool(getattr(loader, "pin_memory", False)),
        }
        self.paths["dataloaders"].append(entry)

    def on_collective(self, name: str) -> None:
        counts = self.paths["collectives"]
        counts[name] = counts.get(name, 0) + 1

    def on_backward(self, tensor) -> None:
        if self.manual is None and not self.launcher:
            if not self.optimizer_built:  # one built before the hook was installed (a forkserver worker)
                import gc

                self.optimizer_built = any(isinstance(o, self.torch.optim.Optimizer) for o in gc.get_objects())
            self.manual = not self.optimizer_built
        if self.manual:
            self.close_manual()
        if self.global_done >= self.limit and (self.steps or self.offset is not None):
            if self.snapshot_dir:
                _write_tree(os.path.join(self.out, TREE_AT_STOP))
            raise VerifyStop
        if self.snapshot_dir and self.steps:
            self._snapshot()
        value = tensor.detach()
        entry = {
            "value": float(value.cpu().to(self.torch.float64).sum()),
            "dtype": str(value.dtype).replace("torch.", ""),
            "device": value.device.type,
            "shape": list(value.shape),
        }
        scaled = self.last_scaled
        if scaled is not None and scaled[0] is tensor and scaled[1]:
            entry["unscaled"] = entry["value"] / scaled[1]  # the GradScaler's output: the loss times the scale
        self.last_scaled = None
        self.pending_losses.append(entry)
        if self.manual:
            self.open_manual(tensor)

    # -- steps of a script that updates its parameters by hand ---------------------------

    def graph_params(self, tensor) -> list:
        """The leaf tensors ``tensor``'s backward() accumulates gradients into (the
        parameters a hand-written update then changes), in the graph's own order."""
        found, seen, stack = [], set(), [getattr(tensor, "grad_fn", None)]
        visited = set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in visited:
                continue
            visited.add(id(node))
            variable = getattr(node, "variable", None)
            if variable is not None and id(variable) not in seen:
                seen.add(id(variable))
                found.append(variable)
            stack.extend(reversed([fn for fn, _ in getattr(node, "next_functions", ())]))
        return found

    def open_manual(self, tensor) -> None:
        """At a backward() without an optimizer: the step begins (its loss, the parameters
        before it); the gradient norm is taken when backward() returns, the parameters after
        the hand-written update at the next backward() or when the run ends."""
        self._fix_rank()
        params = self.graph_params(tensor)
        before = self.digest(params)
        if self.offset is None:
            self._align(before)
        record = {
            "optimizer": 0,
            "manual": True,
            "losses": self.pending_losses,
            "grad_norm": None,
            "grad_norm_clip": None,
            "digest_before": before,
            "param_devices": self.devices(params),
            "devices": sorted({p.device.type for p in params} | {loss["device"] for loss in self.pending_losses}),
            "autocast": self.take_autocast(),
            "skipped": False,
            "scale": None,
            "step": self.global_done + 1,
        }
        self.pending_losses = []
        self.steps.append(record)
        self._manual_open = (record, params)

    def after_manual_backward(self) -> None:
        if self._manual_open is not None:
            record, params = self._manual_open
            record["grad_norm"] = self.grad_norm(params)
            record["devices"] = sorted(set(record["devices"]) | {p.grad.device.type for p in params
                                                                 if p.grad is not None})

    def close_manual(self) -> None:
        """The open step's parameters after the script's own update (and the clip norm)."""
        if self._manual_open is None:
            return
        record, params = self._manual_open
        self._manual_open = None
        record["grad_norm_clip"] = self.take_clip()
        record["digest_after"] = self.digest(params)
        flat = self.torch.cat([_local(p.detach()).cpu().float().reshape(-1) for p in params]) if params else None
        if flat is not None:
            if flat.numel() > KEEP_EVERY_STEP:
                self.params.clear()
            self.params[record["step"]] = flat.numpy().copy()
        self.write()

    def _snapshot(self) -> None:
        """At the first backward() after step k, where the script saved after step k: copy the
        project copy as a run stopped here (``NPU_MIGRATE_VERIFY_STEPS=k``) would leave it."""
        done = self.global_done
        if done == self._snapped or done not in self.saves or done >= self.limit or self.launcher:
            return
        self._snapped = done
        import shutil

        root = os.environ.get(ENV_ROOT)
        target = os.path.join(self.snapshot_dir, f"after-step-{done}")
        try:
            if not root or _tree_size(root) > SNAPSHOT_LIMIT:
                raise OSError("no project copy, or too large to snapshot")
            os.makedirs(self.snapshot_dir, exist_ok=True)
            shutil.copytree(root, target + ".tmp", symlinks=True)
            for old in os.listdir(self.snapshot_dir):  # only the latest is kept
                if old != os.path.basename(target) + ".tmp":
                    shutil.rmtree(os.path.join(self.snapshot_dir, old), ignore_errors=True)
            os.replace(target + ".tmp", target)
        except OSError:  # verify then runs a stop run, as without snapshots
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
            self.snapshot_dir = None

    def _fix_rank(self) -> None:
        """At the first step: the process group's rank where one is up."""
        if self._rank_fixed:
            return
        self._rank_fixed = True
        dist = self.torch.distributed
        if dist.is_available() and dist.is_initialized():
            self.rank = dist.get_rank()

    def _align(self, digest: str) -> None:
        if self.align_digests is None and self._align_dir:
            try:
                with open(os.path.join(self._align_dir, f"rank{self.rank}.json"), encoding="utf-8") as fh:
                    self.align_digests = [s["digest_before"] for s in json.load(fh)["steps"]]
            except (OSError, ValueError, KeyError):
                self.align_digests = []
        digests = self.align_digests or []
        if digest in digests:
            self.offset = digests.index(digest)
        else:
            self.offset, self.aligned = self.resumed_after, False

    def before_step(self, optimizer) -> None:
        if self.manual:
            raise StepCountError("it counted this script's steps by backward() (no torch.optim optimizer "
                               "existed at the first backward()), and then an optimizer stepped: steps cannot be "
                               "counted either way")
        self._fix_rank()
        params = self._params_of(optimizer)
        before = self.digest(params)
        if self.offset is None:  # a restarted run: which global step is this?
            self._align(before)
        self._current = {
            "optimizer": self._optimizer_index(optimizer),
            "losses": self.pending_losses,
            "grad_norm": self.grad_norm(params),
            "grad_norm_clip": self.take_clip(),
            "digest_before": before,
            "param_devices": self.devices(params),
            "devices": self.touched(params),
            "autocast": self.take_autocast(),
            "skipped": False,
            "scale": None,
        }
        self.pending_losses = []

    def after_step(self, optimizer) -> None:
        record = getattr(self, "_current", None)
        if record is None:
            return
        self._current = None
        params = self._params_of(optimizer)
        record["digest_after"] = self.digest(params)
        self._finish(record, params)
        self._stepped_in_scaler = True

    def skipped_step(self, optimizer) -> None:
        """GradScaler.step found inf/NaN gradients and did not call optimizer.step()."""
        self._fix_rank()
        params = self._params_of(optimizer)
        digest = self.digest(params)
        if self.offset is None:
            self._align(digest)
        record = {
            "optimizer": self._optimizer_index(optimizer),
            "losses": self.pending_losses,
            "grad_norm": None,
            "grad_norm_clip": self.take_clip(),
            "digest_before": digest,
            "digest_after": digest,
            "param_devices": self.devices(params),
            "devices": self.touched(params),
            "autocast": self.take_autocast(),
            "skipped": True,
            "scale": None,
        }
        self.pending_losses = []
        self._finish(record, params)

    def _finish(self, record: dict, params) -> None:
        record["step"] = self.global_done + 1
        self.steps.append(record)
        flat = self.torch.cat([_local(p.detach()).cpu().float().reshape(-1) for p in params]) if params else None
        if flat is not None:
            if flat.numel() > KEEP_EVERY_STEP:
                self.params.clear()
            self.params[record["step"]] = flat.numpy().copy()
        self.write()

    def on_scale(self, scale: float, growth_tracker: int) -> None:
        if self.steps:
            self.steps[-1]["scale"] = scale
            self.steps[-1]["growth_tracker"] = growth_tracker

    def _optimizer_index(self, optimizer) -> int:
        for i, known in enumerate(self._optimizers):
            if known is optimizer:
                return i
        self._optimizers.append(optimizer)
        return len(self._optimizers) - 1

    # -- output ------------------------------------------------------------------------

    def write(self) -> None:
        data = {
            "rank": self.rank,
            "status": self.status,
            "error": self.error,
            "frame": self.frame,
            "offset": self.offset,
            "aligned": self.aligned,
            "steps": self.steps,
            "saves": self.saves,
            "autocast": self.autocast,
            "paths": self.paths,
            "torch": self.torch.__version__,
            "pending_losses": self.pending_losses,
        }
        path = os.path.join(self.out, "launcher.json" if self.launcher else f"rank{self.rank}.json")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)

    def write_params(self) -> None:
        import numpy as np

        if self.params and not self.launcher:
            np.savez(os.path.join(self.out, f"rank{self.rank}.npz"),
                     **{f"step{step}": flat for step, flat in self.params.items()})


def _tree_size(root: str) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def tree_listing(root: str) -> dict[str, list[int]]:
    """Every file under ``root`` (links not followed): its size and modification time."""
    listing = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                listing[os.path.relpath(path, root)] = [st.st_size, st.st_mtime_ns]
    return listing


def _write_tree(path: str) -> None:
    root = os.environ.get(ENV_ROOT)
    if root:
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as fh:
            json.dump(tree_listing(root), fh)


#: The recorder the hooks write to (a process forked by the script gets its own, see spawned.py).
_ACTIVE: list[Recorder] = []


def active() -> Recorder | None:
    return _ACTIVE[0] if _ACTIVE else None


def activate(recorder: Recorder) -> None:
    _ACTIVE[:] = [recorder]


def install(recorder: Recorder) -> None:
    """Make ``recorder`` the active one and hook torch (once per process)."""
    installed = bool(_ACTIVE)
    activate(recorder)
    if installed:
        return
    torch = recorder.torch
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    original_backward = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        recorder = active()
        recorder.on_backward(self)
        result = original_backward(self, *args, **kwargs)
        if recorder.manual:
            recorder.after_manual_backward()
        return result

    torch.Tensor.backward = backward
    original_optimizer_init = torch.optim.Optimizer.__init__

    def optimizer_init(self, *args, **kwargs):
        active().optimizer_built = True
        return original_optimizer_init(self, *args, **kwargs)

    torch.optim.Optimizer.__init__ = optimizer_init
    register_optimizer_step_pre_hook(lambda opt, args, kwargs: active().before_step(opt))
    register_optimizer_step_post_hook(lambda opt, args, kwargs: active().after_step(opt))

    scaler_cls = torch.amp.GradScaler
    original_step, original_update = scaler_cls.step, scaler_cls.update

    def scaler_step(self, optimizer, *args, **kwargs):
        recorder = active()
        recorder._stepped_in_scaler = False
        result = original_step(self, optimizer, *args, **kwargs)
        if not recorder._stepped_in_scaler and self.is_enabled():
            recorder.skipped_step(optimizer)
        return result

    def scaler_update(self, *args, **kwargs):
        recorder = active()
        result = original_update(self, *args, **kwargs)
        if self.is_enabled():
            recorder.on_scale(float(self.get_scale()), int(self._get_growth_tracker()))
            recorder.write()
        return result

    original_scale = scaler_cls.scale

    def scaler_scale(self, outputs):
        recorder = active()
        result = original_scale(self, outputs)
        if isinstance(result, torch.Tensor) and self.is_enabled():
            recorder.last_scaled = (result, float(self.get_scale()))
        return result

    scaler_cls.step, scaler_cls.update, scaler_cls.scale = scaler_step, scaler_update, scaler_scale

    original_save = torch.save

    def save(*args, **kwargs):
        recorder = active()
        result = original_save(*args, **kwargs)
        recorder.saves.append(recorder.global_done)
        return result

    torch.save = save

    autocast_cls = torch.amp.autocast_mode.autocast
    original_enter = autocast_cls.__enter__

    def enter(self):
        recorder = active()
        entry = [self.device, str(self.fast_dtype).replace("torch.", ""), bool(self._enabled)]
        recorder.on_autocast(entry)
        return original_enter(self)

    autocast_cls.__enter__ = enter
    _install_paths(torch)


#: torch.distributed's collectives whose calls each twin counts (the script's own calls;
#: DDP's gradient buckets are reduced inside its C++ reducer, not here).
COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
               "reduce_scatter_tensor", "reduce", "gather", "scatter", "barrier", "all_to_all", "all_to_all_single",
               "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list", "send", "recv",
               "isend", "irecv")


def _install_paths(torch) -> None:
    """Record the DataLoaders built, the process group's backend, collectives, DDP/FSDP,
    and the gradient norm clip_grad_norm_ measures before it clips."""
    import functools
    import importlib

    from torch.utils.data import DataLoader

    original_loader_init = DataLoader.__init__

    @functools.wraps(original_loader_init)
    def loader_init(self, *args, **kwargs):
        original_loader_init(self, *args, **kwargs)
        recorder = active()
        if recorder is not None:
            recorder.on_dataloader(self)

    DataLoader.__init__ = loader_init
    clip_module = importlib.import_module("torch.nn.utils.clip_grad")
    original_clip = clip_module.clip_grad_norm_

    @functools.wraps(original_clip)
    def clip_grad_norm_(*args, **kwargs):
        total = original_clip(*args, **kwargs)
        recorder = active()
        if recorder is not None:
            with contextlib.suppress(Exception):
                recorder.pending_clip = float(total)
        return total

    clip_module.clip_grad_norm_ = clip_grad_norm_
    _install_attention(torch)
    torch.nn.utils.clip_grad_norm_ = clip_grad_norm_
    dist = torch.distributed
    if not dist.is_available():
        return
    c10d = importlib.import_module("torch.distributed.distributed_c10d")
    original_init = dist.init_process_group

    @functools.wraps(original_init)
    def init_process_group(*args, **kwargs):
        args, kwargs = _own_port(args, kwargs)
        result = original_init(*args, **kwargs)
        recorder = active()
        if recorder is not None:
            with contextlib.suppress(Exception):
                recorder.paths["process_group"] = {"backend": str(dist.get_backend()),
                                                   "world_size": dist.get_world_size()}
        return result

    dist.init_process_group = c10d.init_process_group = init_process_group

    def counted(name, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            recorder = active()
            if recorder is not None:
                recorder.on_collective(name)
            return fn(*args, **kwargs)

        return wrapped

    for name in COLLECTIVES:
        fn = getattr(dist, name, None)
        if fn is not None:
            setattr(dist, name, counted(name, fn))
    from torch.nn.parallel import DistributedDataParallel

    def wrapper(cls):
        original = cls.__init__

        @functools.wraps(original)
        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            recorder = active()
            if recorder is not None:
                recorder.paths["wrappers"].append(cls.__name__)

        cls.__init__ = init

    wrapper(DistributedDataParallel)
    # FSDP when the script (or a library) imports it: importing it here costs every run
    # about 0.7 s of CPU (torch.distributed.tensor), for the few scripts that use it.
    from npu_migrate.verify.lazy import FSDP2_MODULE, FSDP_MODULE, after_import

    after_import(FSDP_MODULE, lambda module: wrapper(module.FullyShardedDataParallel))
    after_import(FSDP2_MODULE, _record_fully_shard)


def _record_fully_shard(module) -> None:
    """FSDP2: each ``fully_shard(...)`` call is recorded as ``fully_shard`` in the wrappers
    (a function, not a class: it turns the module into an ``FSDP<cls>``). Patched in its
    defining module right after it runs, so every later ``from ... import fully_shard``
    (torch.distributed.fsdp's own re-export too) and its own ``fully_shard.state(...)``
    calls get the wrapper; ``functools.wraps`` keeps ``.state``."""
    import functools

    original = module.fully_shard

    @functools.wraps(original)
    def fully_shard(*args, **kwargs):
        result = original(*args, **kwargs)
        recorder = active()
        if recorder is not None:
            recorder.paths["wrappers"].append("fully_shard")
        return result

    module.fully_shard = fully_shard



def _install_attention(torch) -> None:
    """Record the scaled-dot-product-attention kernels each ``sdpa_kernel`` context
    allows (a kernel choice: the same attention, other rounding)."""
    import functools
    import importlib

    try:
        attention = importlib.import_module("torch.nn.attention")
    except ImportError:  # pragma: no cover - in every torch this project supports
        return
    original = getattr(attention, "sdpa_kernel", None)
    if original is None:  # pragma: no cover
        return

    @functools.wraps(original)
    def sdpa_kernel(backends, *args, **kwargs):
        recorder = active()
        if recorder is not None:
            with contextlib.suppress(Exception):
                listed = backends if isinstance(backends, (list, tuple)) else [backends]
                entry = sorted(getattr(b, "name", str(b)) for b in listed)
                if entry not in recorder.paths["attention"]:
                    recorder.paths["attention"].append(entry)
        return original(backends, *args, **kwargs)

    attention.sdpa_kernel = sdpa_kernel


def _own_port(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``init_process_group``'s arguments with this run's port (``ENV_PORT``) in place of
    the script's: ``MASTER_PORT`` for ``env://``, the port of a ``tcp://`` init method."""
    import re

    port = os.environ.get(ENV_PORT)
    if not port:
        return args, kwargs
    os.environ["MASTER_PORT"] = port
    method = kwargs.get("init_method") if "init_method" in kwargs else (args[1] if len(args) > 1 else None)
    if isinstance(method, str) and method.startswith("tcp://"):
        method = re.sub(r":\d+(?=$|[/?])", f":{port}", method, count=1)
        if "init_method" in kwargs:
            kwargs["init_method"] = method
        else:
            args = (args[0], method, *args[2:])
    return args, kwargs


def reason_line(exc: BaseException, limit: int = 300) -> str:
    """One line for a crash: its type and the first line of its message (a dispatcher
    error's list of backends, or a long chained message, is left to the log). Terminal
    escapes are left out (torch.load's weights-only refusal prints a sentence in bold)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", str(exc)).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > 160 and ". " in first[:limit]:  # a dispatcher error: its first sentence
        first = first[: first.index(". ") + 1]
    if len(first) > limit:
        first = first[: limit - 3] + "..."
    name = type(exc).__name__
    return f"{name}: {first}" if first else name


def user_frame(exc: BaseException) -> str | None:
    """The innermost frame of the traceback in the project's own files (under
    ``NPU_MIGRATE_VERIFY_ROOT``, not in an installed package): ``train.py:43 model.cuda()``."""
    root = os.environ.get(ENV_ROOT)
    if not root:
        return None
    root = os.path.realpath(root)
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.realpath(frame.filename)
        if not path.startswith(root + os.sep) or "site-packages" in path:
            continue
        found = f"{os.path.relpath(path, root)}:{frame.lineno} {(frame.line or '').strip()}".strip()
    return found


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy comes with the [emulate] extra
        pass


def _shutdown_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(Exception):  # best effort at the end of a stopped run
            dist.destroy_process_group()


def boot(rank: int | None = None) -> Recorder:
    """Hook this process (the script's, or one it started): the reference twin's
    CUDA-on-NPU layer (or the CPU retarget's CUDA-on-CPU one), the recorder, the seeds (the processes the script starts itself are hooked
    by :func:`npu_migrate.verify.spawned.boot`, which calls this)."""
    import torch

    if os.environ.get(ENV_REFERENCE) == "1":
        from npu_migrate.verify import cuda_on_npu

        cuda_on_npu.install()
    elif os.environ.get(ENV_CPU) == "1":
        from npu_migrate.verify import cuda_on_cpu

        cuda_on_cpu.install()
    out = os.environ[ENV_OUT]
    os.makedirs(out, exist_ok=True)
    recorder = Recorder(torch, out, int(os.environ.get(ENV_STEPS, "5")), os.environ.get(ENV_ALIGN), rank=rank)
    install(recorder)
    seed()
    return recorder


def seed() -> None:
    _seed(int(os.environ.get(ENV_SEED, "0")))


def record(recorder: Recorder, call, reraise: bool = False) -> int:
    """Run ``call()`` and record how it ended; the exit code (``reraise``: a crash is
    raised again, after it is recorded, so that the script's own handling sees it)."""
    code = 0
    try:
        call()
        recorder.status = "finished"
    except VerifyStop:
        recorder.status = "stopped"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        recorder.status = "finished" if code == 0 else "crashed"
        if code:
            recorder.error = f"the script exited with status {exc.code}"
        if reraise:
            raise
    except BaseException as exc:  # every crash is a result to report
        recorder.status = "crashed"
        recorder.error = reason_line(exc)
        recorder.frame = user_frame(exc)
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        if isinstance(exc, StepCountError):
            recorder.error = f"verify: {exc}"
        elif last and os.sep.join(("npu_migrate", "verify", "")) in last[0].filename:
            recorder.error = f"verify's own recorder failed (a bug in verify, please report it): {recorder.error}"
        if reraise:
            raise
        traceback.print_exc()
        code = 1
    finally:
        recorder.close_manual()  # a hand-updated last step: its parameters after the update
        recorder.write()
        recorder.write_params()
    if recorder.status == "stopped":
        _shutdown_process_group()
    return code
