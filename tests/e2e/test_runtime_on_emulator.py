"""npu_runtime on the emulated NPU with two processes and backend hccl:
init_distributed, Watchdog and CheckpointManager together (tests/runtime covers
each in depth on CPU/gloo). A job hangs after saving at step 3, the watchdog
kills it, and the relaunch resumes to exactly the losses and parameters of an
uninterrupted job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import emulator_cmd, run_all

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parent / "runtime_train.py"
STEPS, HANG_AFTER = 8, 3


def _results(out: Path) -> list[dict]:
    return [json.loads(out.with_name(f"{out.name}.rank{r}").read_text()) for r in range(2)]


def test_runtime_hangs_is_killed_and_resumes_exactly_on_emulated_hccl(tmp_path, emulator_build):
    from npu_runtime import WATCHDOG_EXIT_CODE

    full_out, hung_out, resumed_out = tmp_path / "full.json", tmp_path / "hung.json", tmp_path / "resumed.json"
    full, hung = run_all(
        emulator_cmd(SCRIPT, ["--ckpt", tmp_path / "ck_full", "--steps", STEPS, "--out", full_out], nproc=2),
        emulator_cmd(SCRIPT, ["--ckpt", tmp_path / "ck", "--steps", STEPS, "--hang-after", HANG_AFTER,
                              "--watchdog-timeout", 4, "--out", hung_out], nproc=2),
        cwd=tmp_path,
    )
    assert full.returncode == 0, full.describe()
    assert hung.returncode != 0, hung.describe()
    assert f"exiting with code {WATCHDOG_EXIT_CODE}" in hung.output, hung.describe()

    (resumed,) = run_all(
        emulator_cmd(SCRIPT, ["--ckpt", tmp_path / "ck", "--steps", STEPS, "--out", resumed_out], nproc=2),
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.describe()

    for whole, first, second in zip(_results(full_out), _results(hung_out), _results(resumed_out)):
        assert whole["backend"] == "hccl"
        assert whole["device"] in ("npu:0", "npu:1")
        assert whole["rank_sum"] == 3.0  # 1 + 2, all-reduced over hccl
        assert len(whole["losses"]) == STEPS and len(first["losses"]) == HANG_AFTER
        assert second["resumed_at"] == HANG_AFTER
        assert first["losses"] + second["losses"] == whole["losses"]
        assert second["params"] == whole["params"]
    assert _results(full_out)[0]["params"] == _results(full_out)[1]["params"]
