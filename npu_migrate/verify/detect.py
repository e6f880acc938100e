"""What the script's launch depends on: does it start its own processes
(``torch.multiprocessing.spawn``)? Is it a DataParallel script?

A script that calls ``mp.spawn(main_worker, nprocs=...)`` is run as one process
with ``--nproc`` devices, and starts its workers itself (npu_migrate/verify/spawned.py
hooks them); any other script is started with torchrun for ``--nproc`` > 1. Only
the script's own file is read (libcst, names resolved through its imports); a
spawn in another module of the project needs ``--spawns``.

A script that builds ``nn.DataParallel`` and has no distributed path of its own
(no process group, DDP or spawn) is verified with one process only: NPU510 makes
the migrated twin a DDP job under torchrun that shards each batch, while the CPU
twin keeps DataParallel (one process, the whole batch); docs/verify.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

#: What starts the processes, by qualified name.
SPAWNERS = frozenset({
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
    "torch.multiprocessing.spawn.spawn",
    "torch.multiprocessing.spawn.start_processes",
})


DATA_PARALLEL = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
})
#: A distributed path of the script's own (NPU510 then rewrites only the DataParallel call).
DISTRIBUTED = SPAWNERS | {
    "torch.distributed.init_process_group", "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
}


class _Calls(cst.CSTVisitor):
    """The qualified names of everything the module calls."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self) -> None:
        self.called: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        names = self.get_metadata(QualifiedNameProvider, node.func, set())
        if callable(names):  # libcst >= 1.2 resolves this provider lazily
            names = names()
        self.called.update(q.name for q in names)


def _called(script: Path) -> set[str]:
    """Empty where the script cannot be read or parsed (then it is run as if it called nothing)."""
    try:
        module = cst.parse_module(script.read_bytes())
    except (OSError, cst.ParserSyntaxError):
        return set()
    visitor = _Calls()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(visitor)
    return visitor.called


def spawns_processes(script: Path) -> bool:
    """True if ``script`` calls torch.multiprocessing's spawn/start_processes."""
    return bool(_called(script) & SPAWNERS)


def data_parallel_only(script: Path) -> bool:
    """True if ``script`` builds nn.DataParallel and has no distributed path of its own."""
    called = _called(script)
    return bool(called & DATA_PARALLEL) and not called & DISTRIBUTED


#: A fixed rendezvous port in the source (``os.environ["MASTER_PORT"] = "12355"``,
#: ``init_method="tcp://localhost:58472"``): two twins at the same time would collide.
_FIXED_PORT = re.compile(r"""MASTER_PORT['"]\s*\]\s*=\s*['"]?\d|MASTER_PORT['"]\s*,\s*['"]?\d|tcp://[^'"\s]*:\d{2,5}""")


def binds_fixed_port(script: Path) -> bool:
    """True if the script sets a fixed rendezvous port (its own file only: a port set in
    another module needs ``--jobs 1``)."""
    try:
        return bool(_FIXED_PORT.search(script.read_text("utf-8", errors="replace")))
    except OSError:
        return False
