"""Two-process hccl DDP jobs that end without destroy_process_group, as migrated
scripts do, leave nothing for interpreter finalisation (docs/e2e.md, "Exit aborts").

``exit_without_destroy.py`` keeps its DDP model in a module global; its last exit
handler reports, per rank, whether a group is still initialised, which gloo threads
are alive, and how many tensors gloo still holds of the emulated hccl backend's.
"""

import json

import pytest

from .conftest import SCRIPTS, run_emulated

pytestmark = pytest.mark.slow

SCRIPT = SCRIPTS / "exit_without_destroy.py"


def _left(*flags: str) -> list[dict]:
    proc = run_emulated(SCRIPT, *flags, nproc=2, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    left = [json.loads(line[len("EXIT "):]) for line in proc.stdout.splitlines() if line.startswith("EXIT ")]
    assert sorted(r.pop("rank") for r in left) == [0, 1]
    return left


def test_npu_runtime_group_and_model_leave_nothing_to_finalisation(emulator_build):
    left = _left("--runtime", "--keep-model")
    assert left == [{"group_initialized": False, "gloo_threads": [], "held_by_gloo": 0}] * 2


def test_torch_npu_exit_handler_shuts_a_script_group_down(emulator_build):
    # As torch_npu's _destructor_process_group: the group is forgotten and gloo let go of
    # everything Python gave it; the model the script keeps frees the group (idle threads) later.
    left = _left("--keep-model")
    for report in left:
        assert not report["group_initialized"] and report["held_by_gloo"] == 0
