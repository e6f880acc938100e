"""``npu-migrate verify`` end to end: real twins, real processes (slow; tiny models, 3-5 steps).

Correct migrations pass; planted wrong migrations (a rule switched off with
--ignore) fail with the right first diverging step; the user's tree is untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PROJECTS = Path(__file__).resolve().parent / "projects"

pytestmark = pytest.mark.slow


def _snapshot(root: Path) -> dict:
    """Every path under root with its bytes, mode and modification time."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (path.read_bytes() if path.is_file() else None, st.st_mode, st.st_mtime_ns)
    return out


def _verify(project: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    report = project.parent / "report" / "verify.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_MIGRATE_")}
    proc = subprocess.run([sys.executable, "-m", "npu_migrate", "verify", "--report", str(report), *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    data = json.loads(report.read_text()) if report.is_file() else {}
    return proc, data


def _copy(name: str, tmp_path: Path) -> Path:
    if name == "cuda_project":
        return Path(shutil.copytree(REPO / "examples" / "cuda_project", tmp_path / name))
    return Path(shutil.copytree(PROJECTS / name, tmp_path / name))


@pytest.mark.timeout(900)
def test_example_project_passes_and_its_tree_is_untouched(tmp_path, emulator_build):
    project = _copy("cuda_project", tmp_path)
    before = _snapshot(project)
    proc, data = _verify(project, "--steps", "3", "train.py", "--", "--epochs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["verdict"] == "pass" and data["precision"]["mode"] == "fp16 autocast"
    assert [row["step"] for row in data["steps"]] == [1, 2, 3]
    assert all(row["cpu"]["losses"] and row["npu"]["losses"] for row in data["steps"])
    assert data["resume"]["status"] == "no-checkpoint"  # 16 steps per epoch: nothing saved by step 2
    assert (tmp_path / "report" / "verify.png").is_file() and (tmp_path / "report" / "verify.txt").is_file()
    assert _snapshot(project) == before


@pytest.mark.timeout(600)
def test_dropped_npu_call_fails_at_step_one(tmp_path, emulator_build):
    project = _copy("cuda_project", tmp_path)
    proc, data = _verify(project, "--steps", "3", "--no-resume", "--ignore", "NPU103", "train.py", "--",
                         "--epochs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["verdict"] == "fail" and data["first_divergence"]["step"] == 1
    assert "CUDA" in data["reason"]  # the leftover .cuda(): "Torch not compiled with CUDA enabled"


@pytest.mark.timeout(900)
def test_amp_with_scaler_and_resume_passes(tmp_path, emulator_build):
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "5", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["resume"]["status"] == "pass" and data["resume"]["stopped_after"] == 4
    assert [row["npu"]["scale"] for row in data["steps"]] == [32.0, 64.0, 128.0, 256.0, 512.0]


@pytest.mark.timeout(900)
def test_scaler_state_not_restored_fails_after_the_resume(tmp_path, emulator_build):
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "5", "--ignore", "NPU401", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["resume"]["status"] == "fail"
    first = data["first_divergence"]
    assert first["step"] == 5 and any("GradScaler scale" in what for what in first["what"])


@pytest.mark.timeout(600)
def test_silent_cpu_work_fails(tmp_path, emulator_build):
    project = _copy("amp_resume", tmp_path)
    # torch.cuda.is_available() left as it is: False on the NPU machine, so the model stays on the CPU
    proc, data = _verify(project, "--steps", "3", "--no-resume", "--ignore", "NPU101", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["silent_cpu"] and data["first_divergence"]["step"] == 1
    assert "silent CPU work" in data["reason"]


@pytest.mark.timeout(900)
def test_ddp_two_processes_with_resume_pass(tmp_path, emulator_build):
    project = _copy("ddp", tmp_path)
    proc, data = _verify(project, "--nproc", "2", "--steps", "5", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["precision"]["mode"] == "fp32"
    assert sorted({row["rank"] for row in data["steps"]}) == [0, 1]
    assert all(row["cpu"]["digest"] == row["npu"]["digest"] for row in data["steps"])  # bit-exact
    resume = data["resume"]
    assert resume["status"] == "pass" and resume["stopped_after"] == 4
    assert resume["migrated"]["status"] == "exact" and {row["step"] for row in resume["steps"]} == {5}


@pytest.mark.timeout(900)
def test_sampler_changing_the_data_order_fails_at_the_second_epoch(tmp_path, emulator_build):
    project = _copy("ddp", tmp_path)
    proc, data = _verify(project, "--nproc", "2", "--steps", "4", "--no-resume", "--ignore", "NPU502", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["first_divergence"]["step"] == 3  # two steps per epoch: epoch 1 repeats epoch 0's order
