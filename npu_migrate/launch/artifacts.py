"""Generated files against what is on disk: the dry-run diff, ``--check`` and ``--write``.

A file is written only when its bytes differ, atomically (npu_migrate.pipeline.writer), so a
second run changes nothing. New shell launchers are executable; an existing file keeps
the mode it has.

A generated path that resolves outside the project root (the file, or a directory on
its way, is a symbolic link that leaves the project) is never read, shown or written:
a repository could ship ``launch/torchrun.sh -> ~/.bashrc``. It is reported and skipped.
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


class OutsideProject(ArtifactError):
    """A generated path resolves (through a symbolic link) outside the project root."""


def outside_error(root: Path, artifact: Artifact) -> OutsideProject | None:
    """The refusal for a path whose real location is outside the project, or None."""
    target = root / artifact.path
    real, real_root = Path(os.path.realpath(target)), Path(os.path.realpath(root))
    if real == real_root or real.is_relative_to(real_root):
        return None
    return OutsideProject(f"{artifact.path}: a symbolic link leads it outside the project (to {real}); "
                          "skipped, not read or written (remove the link to generate the file)")


def plan_writes(root: Path, artifacts: list[Artifact]) -> tuple[list[Planned], list[OutsideProject]]:
    """The files to compare and write, and the refusals for those that leave the project."""
    out, refused = [], []
    for artifact in artifacts:
        target = root / artifact.path
        outside = outside_error(root, artifact)
        if outside is not None:
            refused.append(outside)
            continue
        if target.is_dir():
            raise ArtifactError(f"{artifact.path}: is a directory, cannot write the launcher there")
        if target.exists() and not target.is_file():  # a FIFO or device would block or never end
            raise ArtifactError(f"{artifact.path}: is not a regular file (a FIFO or device?), not read or replaced")
        try:
            old = target.read_bytes()
        except FileNotFoundError:
            old = None
        except OSError as exc:
            raise ArtifactError(f"{artifact.path}: cannot read: {exc.strerror or exc}") from None
        out.append(Planned(artifact, target, old))
    return out, refused


def write(planned: Planned) -> None:
    from npu_migrate.pipeline.writer import write_atomic

    root = planned.target.parents[len(Path(planned.artifact.path).parts) - 1]
    outside = outside_error(root, planned.artifact)  # again, as late as possible
    if outside is not None:
        raise outside
    try:
        planned.target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(os.fspath(planned.target), planned.artifact.data, new_mode=planned.artifact.new_mode)
    except OSError as exc:
        raise ArtifactError(f"{planned.artifact.path}: cannot write: {exc.strerror or exc}") from None
