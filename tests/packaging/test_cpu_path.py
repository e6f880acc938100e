"""The CPU path keeps working (issue 35.4): a migrated repository still imports, and its
entry point starts, where neither torch_npu nor npu-runtime is installed (a CPU
development machine; an Ascend image built without npu-runtime), and says in one line
what it runs without.

The child processes import torch; ``sys.modules[name] = None`` makes ``import name``
raise ImportError there, as on a machine without the package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_project"
WITHOUT = "import sys; sys.modules['torch_npu'] = None; sys.modules['npu_runtime'] = None; "


def _migrated(tmp_path: Path) -> Path:
    repo = tmp_path / "cuda_project"
    shutil.copytree(EXAMPLE, repo)
    result = CliRunner().invoke(main, [str(repo), "--write", "--no-cache", "--quiet"])
    assert result.exit_code in (0, 1), result.output
    return repo


def _python(repo: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT + code], cwd=repo, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_migrated_example_imports_and_starts_without_torch_npu_and_npu_runtime(tmp_path):
    repo = _migrated(tmp_path)
    train = (repo / "train.py").read_text()
    assert "if npu_runtime is not None:\n        npu_runtime.install()" in train
    imported = _python(repo, "import utils, model, data, train; print('tc is', utils.tc.__name__)")
    assert imported.returncode == 0, imported.stderr
    # the alias the migration moved under the guard means what it meant before the migration
    assert "tc is torch.cuda" in imported.stdout
    lines = [line for line in imported.stdout.splitlines() if "npu-runtime" in line]
    assert lines == [("npu-runtime is not installed: no launcher translation, HCCL defaults or hang watchdog "
                      "(pip install npu-runtime==0.1.0)")]
    started = _python(repo, "import runpy; sys.argv = ['train.py', '--help']; runpy.run_path('train.py', run_name='__main__')")
    assert started.returncode == 0, started.stderr
    assert "--device" in started.stdout and started.stdout.count("npu-runtime is not installed") == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_where_the_runtime_is_installed_install_runs(tmp_path):
    repo = _migrated(tmp_path)
    code = ("import sys, types; calls = []; sys.modules['npu_runtime'] = types.SimpleNamespace(install=lambda: calls.append(1)); "
            "sys.modules['torch_npu'] = None; import runpy; sys.argv = ['train.py', '--help']\n"
            "try:\n    runpy.run_path('train.py', run_name='__main__')\nexcept SystemExit:\n    pass\nprint('calls', calls)")
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "calls [1]" in result.stdout and "npu-runtime is not installed" not in result.stdout
