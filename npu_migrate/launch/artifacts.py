"""Generated files against what is on disk: the dry-run diff, ``--check`` and ``--write``.

A file is written only when its bytes differ, atomically (npu_migrate.writer), so a
second run changes nothing. New shell launchers are executable; an existing file keeps
the mode it has.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

NEW, CHANGED, UNCHANGED = "new", "changed", "unchanged"


@dataclass(frozen=True)
class Artifact:
    path: str  # relative to the project root, POSIX
    text: str
    executable: bool = False

    @property
    def data(self) -> bytes:
        return self.text.encode("utf-8")

    @property
    def new_mode(self) -> int:
        return 0o755 if self.executable else 0o644


@dataclass
class Planned:
    artifact: Artifact
    target: Path
    old: bytes | None

    @property
    def status(self) -> str:
        if self.old is None:
            return NEW
        return UNCHANGED if self.old == self.artifact.data else CHANGED


class ArtifactError(OSError):
    """A generated file cannot be read or written; the message names it."""


def plan_writes(root: Path, artifacts: list[Artifact]) -> list[Planned]:
    out = []
    for artifact in artifacts:
        target = root / artifact.path
        if target.is_dir():
            raise ArtifactError(f"{artifact.path}: is a directory, cannot write the launcher there")
        try:
            old = target.read_bytes()
        except FileNotFoundError:
            old = None
        except OSError as exc:
            raise ArtifactError(f"{artifact.path}: cannot read: {exc.strerror or exc}") from None
        out.append(Planned(artifact, target, old))
    return out


def write(planned: Planned) -> None:
    from npu_migrate.writer import write_atomic

    try:
        planned.target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(os.fspath(planned.target), planned.artifact.data, new_mode=planned.artifact.new_mode)
    except OSError as exc:
        raise ArtifactError(f"{planned.artifact.path}: cannot write: {exc.strerror or exc}") from None
