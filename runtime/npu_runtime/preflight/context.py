"""What the checks share: the node's inputs (environment, ``/proc``, tools on PATH,
the launcher's view of the job) and the problems found so far.

Everything a check reads goes through the :class:`Context`, so tests can point it at a
fake ``/proc`` (``proc_root``) and fake ``npu-smi`` / ``hccn_tool`` executables (``path``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DRIVER_TOOLS = ("/usr/local/Ascend/driver/tools",)
ASCEND_ROOT = Path("/usr/local/Ascend")
TOOL_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Problem:
    area: str  # short tag: "launch env", "ranktable", "ports", ...
    message: str
    fix: str

    def line(self) -> str:
        return f"{self.area}: {self.message}; fix: {self.fix}"


@dataclass
class Context:
    environ: Mapping[str, str]
    # The launcher's view of the job (--nodes, --cards, --node-rank, --master).
    nodes: int | None = None
    cards: int | None = None
    node_rank: int | None = None
    master: tuple[str, int] | None = None
    proc_root: Path = Path("/proc")
    path: str | None = None  # PATH to find npu-smi / hccn_tool on (default: the environment's)
    tool_dirs: Sequence[str] = DRIVER_TOOLS
    ranktable_timeout_s: float = 0.0
    master_wait_s: float = 30.0
    host_ids: Sequence[str] = ()
    accelerator: str | None = None  # the ring-controller.atlas name the job was generated for
    python: str = sys.executable  # the interpreter whose torch / torch_npu the job uses
    ascend_root: Path = ASCEND_ROOT  # driver and CANN install root
    dev_root: Path = Path("/dev")  # where /dev/davinci<N> appear
    # Filled in by the checks as they run.
    spec: Any = None  # npu_runtime.env.LaunchSpec, when the environment resolves
    table: Any = None  # npu_runtime.ranktable.Ranktable, when RANK_TABLE_FILE loads
    local_server: int | None = None  # this host's server index in the table
    device_count: int | None = None  # NPUs on this node (npu-smi)
    found: dict[str, str] = field(default_factory=dict)  # what the node has: NPUs, driver, CANN, torch, ...
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was checked or skipped, for -v

    def problem(self, area: str, message: str, fix: str) -> None:
        self.problems.append(Problem(area, message, fix))

    def note(self, text: str) -> None:
        self.notes.append(text)

    # The job's shape: the launcher's flags first, else what the environment resolved to.
    @property
    def job_nodes(self) -> int | None:
        if self.nodes is not None:
            return self.nodes
        if self.table is not None:
            return len(self.table.servers())
        if self.spec is not None and self.spec.local_world_size:
            return max(1, self.spec.world_size // self.spec.local_world_size)
        return None

    @property
    def job_cards(self) -> int | None:
        if self.cards is not None:
            return self.cards
        if self.table is not None and self.local_server is not None:
            return len(self.table.server_devices(self.local_server))
        return self.spec.local_world_size if self.spec is not None else None

    @property
    def world_size(self) -> int | None:
        if self.nodes is not None and self.cards is not None:
            return self.nodes * self.cards
        if self.table is not None:
            return self.table.world_size
        return self.spec.world_size if self.spec is not None else None

    @property
    def node_index(self) -> int | None:
        """This node's index: --node-rank, else the launcher's NODE_RANK, else what the
        environment resolved to (a torchrun worker's GROUP_RANK, a Volcano pod's index)."""
        if self.node_rank is not None:
            return self.node_rank
        raw = self.environ.get("NODE_RANK", "").strip()
        if raw.isascii() and raw.isdigit():
            return int(raw)
        return self.spec.node_rank if self.spec is not None else None

    @property
    def node_index_valid(self) -> bool:
        """False when the node's index is not one of the job's nodes (reported by launch_env)."""
        index, nodes = self.node_index, self.job_nodes
        return index is None or nodes is None or 0 <= index < nodes

    @property
    def multi_node(self) -> bool:
        nodes = self.job_nodes
        return nodes is not None and nodes > 1

    def proc_sys(self, dotted: str) -> str | None:
        """``/proc/sys/<dotted.name>`` as text, or None where the kernel (or container) hides it."""
        try:
            return (self.proc_root / "sys" / dotted.replace(".", "/")).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None

    def find_tool(self, name: str) -> str | None:
        search = self.path if self.path is not None else self.environ.get("PATH", os.defpath)
        found = shutil.which(name, path=search)
        if found is None:
            found = shutil.which(name, path=os.pathsep.join(self.tool_dirs))
        return found

    def run_tool(self, argv: list[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[int, str]:
        """Run a tool; (exit status, stdout+stderr). A tool that hangs counts as failed."""
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            return 124, f"no answer after {timeout:g} s"
        except OSError as exc:
            return 126, str(exc)
        return proc.returncode, (proc.stdout or "") + (proc.stderr or "")
