"""Fixtures for ``npu-migrate launch``: a project with an entry script, and the bundled
example migrated into a temporary directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "cuda_project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A minimal project: an entry script and nothing else."""
    (tmp_path / "train.py").write_text("print('training')\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def migrated_example(tmp_path: Path) -> Path:
    """examples/cuda_project copied into tmp and migrated with ``npu-migrate --write``."""
    target = tmp_path / "demo"
    shutil.copytree(EXAMPLE, target)
    proc = subprocess.run([sys.executable, "-m", "npu_migrate", str(target), "--write", "--no-cache"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "npu_runtime.install()" in (target / "train.py").read_text(encoding="utf-8")
    return target


def read_files(root: Path, under: str = "launch") -> dict[str, bytes]:
    base = root / under
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()} \
        if base.exists() else {}
