"""Training on the emulated NPU against the same training on CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from npu_migrate.emulate.launcher import _free_port

from .conftest import SCRIPTS, json_report, run_emulated

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["fp32", "cnn"])
def test_fp32_training_is_bitwise_equal_to_cpu(training, mode):
    r = training[mode]
    assert r["device"] == "npu:0"
    assert r["params_equal"] is True, r["max_param_diff"]
    assert r["losses_equal"] is True
    assert r["losses_npu"][-1] < r["losses_npu"][0]


def test_lstm_trains_close_to_cpu(training):
    # The fused cell sums the gates in another order than the CPU cell: close, not bitwise.
    r = training["lstm"]
    assert r["device"] == "npu:0"
    assert r["max_param_diff"] < 1e-5
    assert r["losses_npu"] == pytest.approx(r["losses_cpu"], rel=1e-5)


def test_autocast_training_runs_in_lower_precision(training):
    # The npu policy is the accelerator (CUDA-style) list, the CPU one differs: close only.
    r = training["amp"]
    assert r["out_dtype_npu"] == "torch.bfloat16"
    assert r["losses_npu"] == pytest.approx(r["losses_cpu"], rel=5e-2)
    assert r["losses_npu"][-1] < r["losses_npu"][0]


def test_grad_scaler_skips_overflowing_steps_and_backs_off(emulator_build):
    r = json_report(run_emulated(SCRIPTS / "amp_scaler.py"))
    assert r["first_step_skipped"] is True
    assert r["scales"][:4] == [2.0**19, 2.0**18, 2.0**17, 2.0**16]
    assert r["losses"][0] == r["losses"][3]  # skipped steps leave the weights alone
    assert r["losses"][-1] < r["losses"][0]
    assert r["dtypes"] == ["softmax:torch.float32", "torch.float16"]
    assert r["legacy_scaler_device"] == "npu"
    assert r["legacy_autocast_dtype"] == "torch.float16"
    assert r["scale_on_npu"] == "npu:0"


def test_two_process_ddp_with_hccl_equals_gloo_on_cpu(emulator_build, tmp_path):
    script = SCRIPTS / "ddp_train.py"
    npu_out, cpu_out = tmp_path / "npu.pt", tmp_path / "cpu.pt"
    proc = run_emulated(script, str(npu_out), nproc=2)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(_free_port()),
            "--master-addr",
            "127.0.0.1",
            str(script),
            str(cpu_out),
            "--cpu",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ref.returncode == 0, ref.stderr[-4000:]
    npu, cpu = torch.load(npu_out), torch.load(cpu_out)
    assert npu["backend"] == "hccl" and npu["device"] == "npu:0"
    assert cpu["backend"] == "gloo"
    assert npu["losses"] == cpu["losses"]
    assert npu["params"].keys() == cpu["params"].keys()
    for name, value in cpu["params"].items():
        assert torch.equal(npu["params"][name], value), name
    assert [g.tolist() for g in npu["gathered"]] == [[0.0, 0.0], [1.0, 1.0]]
    # torch 2.13's *_single collectives and their coalesced forms, staged through CPU.
    assert npu["tensor_forms"] == cpu["tensor_forms"]
    assert npu["tensor_forms"] == {
        "all_gather_into_tensor": [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0],
        "reduce_scatter_tensor": [10.0, 12.0],
        "all_to_all_single": [0.0, 1.0, 10.0, 11.0],
        "all_gather_coalesced": [
            [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0],
            [0.0, 2.0, 20.0, 22.0],
        ],
        "reduce_scatter_coalesced": [[10.0, 12.0], [20.0]],
    }
    # The hccl group declares npu (as on hardware), so object collectives and
    # barrier stage through npu tensors, and give what gloo gives on CPU.
    assert npu["device_types"] == ["npu"]
    assert npu["broadcast_objects"] == [{"from": 1, "step": 5}, "rank1"]
    assert npu["broadcast_objects"] == cpu["broadcast_objects"]
    assert npu["all_gather_objects"] == [
        {"rank": r, "loss": npu["losses"][-1]} for r in range(2)
    ]
    assert npu["all_gather_objects"] == cpu["all_gather_objects"]
    # ... while a CPU tensor handed to hccl still fails, as on hardware.
    assert cpu["cpu_tensor_collective"] == "accepted"
    assert "expected npu tensors" in npu["cpu_tensor_collective"]


@pytest.mark.timeout(300)
def test_sync_batch_norm_over_two_processes_equals_batch_norm_over_the_whole_batch(emulator_build):
    # ATen has SyncBatchNorm's statistics kernels for CUDA only; the emulator writes them
    # (torch_npu/_syncbn.py) and gathers their stats through hccl's all_gather_single
    r = json_report(run_emulated(SCRIPTS / "syncbn_train.py", nproc=2))
    assert r["device"] == "npu"
    assert r["out"] < 1e-5 and r["grad"] < 1e-5 and r["running_var"] < 1e-6
