"""The emulated NPU is deterministic run to run (docs/emulator.md, "Determinism").

A tiny minGPT-style model (scripts/gpt_sample.py) is trained by two ``mp.spawn`` ranks
with DDP over hccl, dropout, AdamW and a shuffled DistributedSampler, saves a
checkpoint, destroys its group and samples tokens with ``torch.multinomial``. Its
vocabulary is built as ``list(set(text))``, as many character-level scripts do: Python
randomises str hashing per process, so before the launcher fixed ``PYTHONHASHSEED`` the
vocabulary (and with it every loss and token) differed between runs and between ranks.
Three runs must give the same unrounded losses and the same tokens on both ranks, and
each must exit 0 (the script destroys its group while its DDP model is alive).
"""

from __future__ import annotations

import json

import pytest

from .conftest import SCRIPTS, run_emulated

pytestmark = pytest.mark.slow

RUNS = 3


def _run(tmp_path, index: int) -> list[dict]:
    out = tmp_path / f"run{index}"
    out.mkdir()
    proc = run_emulated(SCRIPTS / "gpt_sample.py", "--steps", "4", "--out", str(out),
                        env={"NPU_MIGRATE_EMULATOR_DEVICES": "2", "GPT_SORTED_VOCAB": "0"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.timeout(900)  # ~35 s a run on an idle 2-core machine, 90 s at load 20
def test_two_process_gpt_sampling_is_identical_run_to_run(emulator_build, tmp_path):
    first = _run(tmp_path, 0)
    assert [r["rank"] for r in first] == [0, 1]
    assert all(len(r["losses"]) == 8 and len(r["tokens"]) == 25 for r in first)
    for index in range(1, RUNS):
        assert _run(tmp_path, index) == first, f"run {index} differs from run 0"
