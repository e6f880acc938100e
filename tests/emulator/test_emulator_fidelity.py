"""The emulated NPU as a reference: results a migrated script gets equal CPU's (issue 24)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from .conftest import SCRIPTS, json_report, run_emulated


@pytest.fixture(scope="module")
def fidelity(emulator_build) -> dict:
    return json_report(run_emulated(SCRIPTS / "fidelity.py"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_pinned_dataloader_training_is_bitwise_equal_to_cpu(emulator_build, tmp_path):
    # DataLoader's pin-memory thread calls torch.set_num_threads(1); that used
    # to reach the CPU kernels that stand in for the device (14 of 46 tensors
    # equal after 16 steps, first loss off at step 4).
    script = SCRIPTS / "unet_pin_memory.py"
    npu_out, cpu_out = tmp_path / "npu.pt", tmp_path / "cpu.pt"
    proc = run_emulated(script, "npu", str(npu_out), timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = subprocess.run(
        [sys.executable, str(script), "cpu", str(cpu_out)],
        check=False, capture_output=True, text=True, timeout=400,
    )
    assert ref.returncode == 0, ref.stderr[-4000:]
    npu, cpu = torch.load(npu_out), torch.load(cpu_out)
    assert all(npu["pinned"]) and not any(cpu["pinned"])  # the emulated run really pinned
    assert len(npu["losses"]) == 16
    assert npu["losses"] == cpu["losses"]
    unequal = [k for k, v in cpu["state"].items() if not torch.equal(npu["state"][k], v)]
    assert unequal == []


def test_unfold_is_a_view_on_npu(fidelity):
    v = fidelity["views"]
    assert v["unfold_is_view"] is True
    assert v["unfold_shape"] == [4, 3]
    assert v["unfold_write_seen"] == [0.0, 1.0, 100.0] + [float(i) for i in range(3, 10)]
    assert v["unfold_grad_equal_cpu"] is True


def test_view_as_real_and_complex_are_views_on_npu(fidelity):
    v = fidelity["views"]
    assert v["view_as_complex_is_view"] is True
    assert v["view_as_complex_write_seen"] == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
    assert v["view_as_real_write_seen"] == [7.0, 7.0]


def test_legacy_typed_constructors(fidelity):
    legacy = fidelity["legacy"]
    assert legacy["ones"] == ["npu:0", "torch.float32", [4, 1], 4.0]
    assert legacy["noise"] == ["npu:0", "torch.float32"]  # float64 numpy data, float32 tensor
    assert legacy["labels"] == ["npu:0", "torch.int64"]
    assert legacy["type_to"] == ["npu:0", "torch.npu.FloatTensor"]  # imgs.type(Tensor)
    assert legacy["half_data"] == [1.0, 2.0]
    assert legacy["size_arg"] == [2, 3]
    assert legacy["isinstance"] == [True, False, False]
    assert legacy["same_type_alias"] is True
    assert legacy["dtypes"] == ["torch.int32", "torch.bfloat16"]
    assert legacy["names"] == [
        f"torch.npu.{n}Tensor"
        for n in ("Bool", "Byte", "Char", "Short", "Int", "Long", "Half", "BFloat16",
                  "Float", "Double")
    ]
    assert legacy["wrong_type"]["type"] == "TypeError"
    assert "expected torch.npu.FloatTensor" in legacy["wrong_type"]["msg"]


def test_strict_mode_allows_torchs_own_float64_in_grad_scaler(emulator_build):
    report = json_report(run_emulated(SCRIPTS / "fidelity.py", "--strict", strict=True))
    strict = report["strict"]
    assert strict["ok"] is True, strict
    result = strict["value"]
    assert result["steps"]["ok"] is True
    assert len(result["steps"]["value"]) == 2
    # ... while the user's float64 on npu is still rejected afterwards.
    for key in ("user_float64_after", "user_double_cast_after"):
        assert result[key]["ok"] is False
        assert result[key]["type"] == "TypeError"
        assert "strict mode" in result[key]["msg"]
    assert result["sharded_scaler_exempt"] is True
