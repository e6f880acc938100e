"""The README's quick start, followed line by line: the bundled CUDA example is
migrated, trains on the emulated NPU in one process, and a two-process DDP run
(backend hccl) resumes from the checkpoint the one-process run saved; then a
one-process run resumes from the DDP run's checkpoint."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ..engine.test_cli import CONSOLE_SCRIPT
from .conftest import RUN_TIMEOUT_S, subprocess_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def quick_start_lines() -> list[str]:
    """The shell lines of the README's emulator quick start, without `pip install` (it has
    none now: the second opening command installed everything) and without the closing
    `cd -` back to the checkout (each line here starts from a directory of its own)."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"To see a migrated project train.*?```bash\n(.*?)```", readme, re.DOTALL).group(1)
    return [line for line in block.splitlines()
            if line.strip() and not line.startswith(("pip install", "cd -"))]


def _epochs(output: str) -> list[int]:
    return [int(m) for m in re.findall(r"^epoch (\d+) loss", output, re.MULTILINE)]


def test_readme_quick_start_on_the_emulated_npu(tmp_path, emulator_build):
    demo = tmp_path / "demo"
    env = subprocess_env({"PATH": f"{CONSOLE_SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    outputs = []
    for line in quick_start_lines():
        command = line.replace("/tmp/demo", str(demo))
        if command.startswith(("cp ", "cd ")):
            command = f"cd {REPO} && {command}"
        else:
            command = f"cd {demo} && {command}"
        proc = subprocess.run(["bash", "-ec", command], env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, check=False)
        assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
        outputs.append(proc.stdout + proc.stderr)
    runs = [out for out in outputs if "epoch" in out]
    assert len(runs) == 2, outputs
    single, ddp = runs
    assert _epochs(single) == [0, 1]
    assert sorted(set(_epochs(ddp))) == [2, 3]  # resumed from the one-process checkpoint
    assert "Missing key" not in ddp and "Unexpected key" not in ddp
    # and back: one process resumes from the checkpoint the DDP run saved
    back = subprocess.run([str(CONSOLE_SCRIPT), "emulate", "train.py", "--epochs", "5"], cwd=demo, env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert back.returncode == 0, back.stdout + back.stderr
    assert _epochs(back.stdout) == [4]
