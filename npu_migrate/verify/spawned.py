"""Processes the script starts itself: ``torch.multiprocessing.spawn`` / ``start_processes``.

Many DDP scripts (pytorch/examples' imagenet, most research repositories) are run
as ``python train.py`` and start one process per GPU themselves with
``mp.spawn(main_worker, nprocs=torch.cuda.device_count(), args=...)``. verify runs
such a script as one process (npu_migrate/verify/twins.py) with ``--nproc`` devices
(``torch.cuda.device_count()`` in the reference twin, ``torch.npu.device_count()`` on the
emulated NPU), and this module carries the hook into the processes it starts:

* every process that multiprocessing starts with the ``spawn`` method (a fresh
  interpreter) runs :func:`boot` first, before the script's
  module is imported there as ``__mp_main__``: so the reference twin's CUDA-on-NPU layer
  is in place for the module-level code too. This is done by prefixing the
  interpreter command line multiprocessing builds (``multiprocessing.spawn.
  get_command_line``); a process that records no step (a DataLoader worker) writes
  nothing;
* the function torch starts in each process is wrapped (:func:`_worker`): its spawn
  index is its rank (a process group that is up at the first step has the last
  word), a process forked from the script (``start_method="fork"``) gets a recorder
  of its own, the seeds are set as in a torchrun worker, and a :class:`VerifyStop`
  ends the worker cleanly (process group shut down), so ``mp.spawn`` returns in the
  script's process as after a normal run. A crash is recorded and raised again, so
  the script's process fails as it would;
* the script's own process then writes ``launcher.json`` instead of a rank file.

Not covered: processes started with plain ``multiprocessing.Process`` (their
steps are recorded, but a stop at step N ends them with an exception) and the
``forkserver`` start method's module-level code (the hook is installed in the
worker, after the module ran).
"""

from __future__ import annotations

import functools
import os

from npu_migrate.verify import hook

_BOOT = "import npu_migrate.verify.spawned as _verify_spawned; _verify_spawned.boot_child(); "


def install() -> None:
    """Hook torch.multiprocessing's process start and multiprocessing's spawn command line."""
    import multiprocessing.spawn as mp_spawn

    import torch.multiprocessing as tmp

    spawn_module = __import__("torch.multiprocessing.spawn", fromlist=["start_processes"])
    original = spawn_module.start_processes
    if getattr(original, "_npu_migrate_verify", False):
        return

    @functools.wraps(original)
    def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        recorder = hook.active()
        if recorder is not None and not recorder.steps:
            recorder.launcher = True
        return original(functools.partial(_worker, fn), args, nprocs, join, daemon, start_method)

    start_processes._npu_migrate_verify = True
    # spawn() calls the module's start_processes; the package re-exports it under the same name
    spawn_module.start_processes = start_processes
    tmp.start_processes = start_processes

    original_command = mp_spawn.get_command_line

    @functools.wraps(original_command)
    def get_command_line(**kwds):
        command = list(original_command(**kwds))
        if "-c" in command:
            at = command.index("-c") + 1
            command[at] = _BOOT + command[at]
        return command

    mp_spawn.get_command_line = get_command_line


def boot(rank: int | None = None) -> hook.Recorder:
    """Hook this process (:func:`npu_migrate.verify.hook.boot`) and the processes it
    starts through torch.multiprocessing or multiprocessing's spawn."""
    recorder = hook.boot(rank=rank)
    install()
    return recorder


def boot_child() -> None:
    """First thing in a process multiprocessing spawns (a fresh interpreter), when the
    script was started under verify's hook."""
    if os.environ.get(hook.ENV_OUT):
        boot()


def _worker(fn, index, *args):
    """What torch runs in each process it starts: ``fn(index, *args)``, recorded."""
    recorder = hook.active()
    if recorder is None:  # forkserver: the hook was not booted in this process
        recorder = boot(rank=index)
    elif recorder.pid != os.getpid():  # forked from the script's process: its recorder is the parent's
        recorder = hook.Recorder(recorder.torch, recorder.out, recorder.limit, os.environ.get(hook.ENV_ALIGN),
                                 rank=index)
        hook.activate(recorder)
    else:
        recorder.rank = index
    hook.seed()
    hook.record(recorder, lambda: fn(index, *args), reraise=True)
