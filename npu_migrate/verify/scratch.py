"""The scratch copies of the user's project (nothing is ever written into the original)."""

from __future__ import annotations

import shutil
from pathlib import Path

#: Directories never copied: version control, environments, caches.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "env", ".tox", ".nox", "node_modules", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".npu_migrate_cache", ".ipynb_checkpoints",
})


def _ignore(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in SKIP_DIRS}


def copy_project(root: Path, dest: Path, skip: Path | None = None) -> Path:
    """Copy ``root`` to ``dest`` (symbolic links stay links; ``skip``, the scratch
    directory itself when it lies inside ``root``, is left out)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        out = _ignore(directory, names)
        if skip is not None:
            out |= {name for name in names if Path(directory, name).resolve() == skip}
        return out

    shutil.copytree(root, dest, symlinks=True, ignore=ignore)
    return dest
