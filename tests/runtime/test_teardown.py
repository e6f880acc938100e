"""npu_runtime.teardown: a job that never calls destroy_process_group, as migrated
scripts do, ends with its group destroyed while the interpreter is whole.

Two gloo processes under torchrun run ``parallel_worker.py --leave-group``: the
DDP models stay in module globals and nothing destroys the group. Its last exit
handler reports what is left for interpreter finalisation (docs/e2e.md, "Exit
aborts": a group or gloo thread left there can abort or hang the process).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ._helpers import child_env, free_port

WORKER = str(Path(__file__).resolve().with_name("parallel_worker.py"))

pytestmark = pytest.mark.slow


def _run(*flags: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), WORKER, *flags],
                          env=child_env(), capture_output=True, text=True, timeout=240, check=False)
    left = [json.loads(line[len("EXIT "):]) for line in proc.stdout.splitlines() if line.startswith("EXIT ")]
    return proc, left


def test_the_runtime_destroys_its_group_before_finalisation():
    proc, left = _run("--leave-group")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("REPORT ") == 2
    # data_parallel's DDP, distribute_model's, and one the script made on the runtime's group
    assert left == [{"group_initialized": False, "gloo_threads": [], "reducers_kept": [False] * 3}] * 2


def test_a_group_the_script_created_is_left_alone():
    proc, left = _run("--leave-group", "--own-group")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(left) == 2
    for report in left:  # the script tears it down itself, after this report
        assert report["group_initialized"] and report["reducers_kept"] == [True] * 3
        assert report["gloo_threads"]
