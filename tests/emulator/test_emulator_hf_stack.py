"""The HF stack (transformers Trainer, accelerate, PEFT) trains on the emulated NPU as on CPU.

Each test trains a tiny Llama (built from a LlamaConfig, nothing downloaded)
on the emulated NPU and the same script on CPU, and compares every loss, the
gradient norms and a digest of every trained parameter. fp32 and LoRA are
bit-exact; bf16 autocast is held to a stated tolerance (the npu cast policy is
the accelerator list, CPU's differs), although the runs measured here were
bit-exact too. The scripts are in scripts/hf/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from npu_migrate.emulate.launcher import _free_port, launcher_workers, resolve_script

from .conftest import SCRIPTS, _clean_env, run_emulated

HF = SCRIPTS / "hf"

# bf16 autocast: npu runs the accelerator cast policy, CPU its own list.
BF16_LOSS_RTOL = 1e-2
BF16_WEIGHT_ATOL = 1e-2


def _cpu(*args: str, timeout: float = 400, env: dict | None = None) -> None:
    proc = subprocess.run(
        [sys.executable, *args], cwd=HF, env=_clean_env(env), check=False,
        capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def _torchrun(*args: str) -> list[str]:
    return ["-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), *args]


def _emulated(*args: str, nproc: int = 1, env: dict | None = None, timeout: float = 400):
    proc = run_emulated(*args, nproc=nproc, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _start(cmd: list[str], cwd: Path | None = None) -> subprocess.Popen:
    """Start a process whose output goes to an unnamed temporary file (a pipe nobody
    reads while its neighbour runs could fill up and stall it)."""
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by _side_by_side)
    proc = subprocess.Popen(cmd, cwd=cwd, env=_clean_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
    proc.log = log
    return proc


def _side_by_side(*procs: subprocess.Popen, timeout: float = 400) -> None:
    """Wait for processes started together; each must exit 0 (a hung one is killed)."""
    failures = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with proc.log as log:
            log.seek(0)
            output = log.read()
        if proc.returncode != 0:
            failures.append(f"$ {' '.join(proc.args)}\nexit {proc.returncode}\n{output[-4000:]}")
    assert not failures, "\n\n".join(failures)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def single(emulator_build, tmp_path_factory) -> dict:
    """fp32, bf16 and LoRA Trainer runs, on npu and on CPU, plus a resumed npu run."""
    tmp = tmp_path_factory.mktemp("hf_single")
    script = str(HF / "trainer_llama.py")
    modes = "fp32,bf16,lora"
    # The npu and CPU runs are independent processes (one workdir each): side by side.
    _side_by_side(
        _start([sys.executable, "-m", "npu_migrate.emulate", "--nproc", "1", script, str(tmp / "npu.json"), modes,
                "--workdir", str(tmp / "npu")]),
        _start([sys.executable, script, str(tmp / "cpu.json"), modes, "--workdir", str(tmp / "cpu")], cwd=HF),
    )
    # A restarted job: a new process resumes fp32 from its step-3 checkpoint.
    _emulated(script, str(tmp / "resumed.json"), "fp32", "--workdir", str(tmp / "npu"),
              "--resume-step", "3")
    return {
        "npu": _load(tmp / "npu.json"),
        "cpu": _load(tmp / "cpu.json"),
        "resumed": _load(tmp / "resumed.json")["fp32"],
        "checkpoint": tmp / "npu" / "fp32" / "checkpoint-3",
    }


def _assert_same_training(npu: dict, cpu: dict, steps: int) -> None:
    assert len(npu["losses"]) == steps
    assert npu["losses"] == cpu["losses"]
    assert npu["grad_norms"] == cpu["grad_norms"]
    assert npu["params"] == cpu["params"]


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_trainer_fp32_is_bitwise_equal_to_cpu(single):
    npu, cpu = single["npu"]["fp32"], single["cpu"]["fp32"]
    assert npu["device"] == "npu:0" and cpu["device"] == "cpu"
    assert len(npu["params"]) == 21  # every parameter of the tiny Llama
    _assert_same_training(npu, cpu, steps=6)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_trainer_bf16_is_within_tolerance_of_cpu(single):
    npu, cpu = single["npu"]["bf16"], single["cpu"]["bf16"]
    assert npu["device"] == "npu:0"
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=BF16_LOSS_RTOL)
    assert npu["weights"].keys() == cpu["weights"].keys()
    for name, values in cpu["weights"].items():
        diff = (torch.tensor(npu["weights"][name]) - torch.tensor(values)).abs().max()
        assert diff <= BF16_WEIGHT_ATOL, name


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_peft_lora_fine_tune_is_bitwise_equal_to_cpu(single):
    npu, cpu = single["npu"]["lora"], single["cpu"]["lora"]
    # Only the adapters train: q_proj and v_proj, A and B, in two layers.
    assert len(npu["params"]) == 8 and all("lora_" in n for n in npu["params"])
    _assert_same_training(npu, cpu, steps=6)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_trainer_resume_is_exact(single):
    full, resumed = single["npu"]["fp32"], single["resumed"]
    assert resumed["global_step"] == 6
    assert resumed["losses"] == full["losses"][3:]  # steps 4-6, recomputed after the restart
    assert resumed["params"] == full["params"]
    # The Trainer saved the npu RNG through torch.npu.random.
    rng = torch.load(single["checkpoint"] / "rng_state.pth", weights_only=False)
    assert "npu" in rng


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_trainer_fsdp_two_processes(emulator_build, tmp_path):
    script = str(HF / "trainer_llama.py")
    args = ("fsdp", "--workdir", str(tmp_path / "w"), "--steps", "4")
    _emulated(script, str(tmp_path / "npu.json"), *args, nproc=2)
    _cpu(*_torchrun(script, str(tmp_path / "cpu.json"), *args))
    # A restarted 2-process job: both ranks resume from the sharded step-3
    # checkpoint (FSDP's distributed checkpoint of model and optimizer, each
    # rank's RNG state) and recompute step 4.
    _emulated(script, str(tmp_path / "resumed.json"), *args, "--resume-step", "3", nproc=2)
    npu = _load(tmp_path / "npu.json")["fsdp"]
    cpu = _load(tmp_path / "cpu.json")["fsdp"]
    assert npu["device"] == "npu:0" and npu["backend"] == "hccl"
    assert cpu["backend"] == "gloo"
    # accelerate shards with FSDP on npu only; on CPU the Trainer falls back to
    # DDP (accelerate 1.15.0's AcceleratorState turns `fsdp=` into FSDP only for
    # MULTI_GPU/NPU/XPU/... groups, never MULTI_CPU, although torch shards on
    # gloo: test_fsdp2_two_processes_against_fsdp2_on_gloo). The same
    # data-parallel step: losses and parameters are bitwise equal, the gradient
    # norm is summed over shards in another order.
    assert npu["losses"] == cpu["losses"]
    assert npu["params"] == cpu["params"] and len(npu["params"]) == 21
    assert npu["grad_norms"] == pytest.approx(cpu["grad_norms"], rel=1e-6)
    rank1_npu = _load(tmp_path / "npu.json.rank1")["fsdp"]
    rank1_cpu = _load(tmp_path / "cpu.json.rank1")["fsdp"]
    assert rank1_npu["device"] == "npu:1"
    assert rank1_npu["losses"] == rank1_cpu["losses"]
    resumed = _load(tmp_path / "resumed.json")["fsdp"]
    resumed1 = _load(tmp_path / "resumed.json.rank1")["fsdp"]
    assert resumed["global_step"] == 4 and resumed["device"] == "npu:0"
    assert resumed["losses"] == npu["losses"][3:] and len(resumed["losses"]) == 1
    assert resumed1["losses"] == rank1_npu["losses"][3:]
    assert resumed["params"] == npu["params"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fsdp2_two_processes_against_fsdp2_on_gloo(emulator_build, tmp_path):
    """The FSDP reference the Trainer cannot give on CPU (accelerate routes its
    fsdp option only for accelerator process groups): torch's fully_shard on
    the emulated NPU over hccl and on CPU over gloo, the same sharded step."""
    script = str(HF / "fsdp_llama.py")
    _emulated(script, str(tmp_path / "npu.json"), nproc=2)
    _cpu(*_torchrun(script, str(tmp_path / "cpu.json")))
    for suffix, device in (("", "npu:0"), (".rank1", "npu:1")):
        npu, cpu = _load(tmp_path / f"npu.json{suffix}"), _load(tmp_path / f"cpu.json{suffix}")
        assert npu["device"] == device and npu["backend"] == "hccl"
        assert cpu["device"] == "cpu" and cpu["backend"] == "gloo"
        # Both shard: a DTensor per parameter, half the 64 embedding rows each.
        assert npu["sharded"] == cpu["sharded"] == "DTensor"
        assert npu["local_rows"] == cpu["local_rows"] == 32
        assert len(npu["losses"]) == 4 and npu["losses"] == cpu["losses"]
        assert npu["params"] == cpu["params"] and len(npu["params"]) == 21


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_accelerate_launch_two_processes(emulator_build, tmp_path):
    script = str(HF / "accelerate_loop.py")
    port = str(_free_port())
    # As a user runs it: npu-migrate emulate accelerate launch ... (the emulator
    # gives each of the --num_processes workers its own device).
    _emulated("accelerate", "launch", "--multi_gpu", "--num_processes", "2",
              "--main_process_port", port, script, str(tmp_path / "npu.json"))
    _cpu(*_torchrun(script, str(tmp_path / "cpu.json")), env={"ACCELERATE_USE_CPU": "1"})
    npu, cpu = _load(tmp_path / "npu.json"), _load(tmp_path / "cpu.json")
    assert npu["distributed_type"] == "DistributedType.MULTI_NPU"
    assert cpu["distributed_type"] == "DistributedType.MULTI_CPU"
    assert npu["num_processes"] == cpu["num_processes"] == 2
    # accelerator.gather (all_gather_into_tensor) every step, both ranks' losses.
    assert len(npu["gathered_losses"]) == 4 and all(len(g) == 2 for g in npu["gathered_losses"])
    assert npu["gathered_losses"] == cpu["gathered_losses"]
    assert npu["grad_norms"] == cpu["grad_norms"]
    assert npu["params"] == cpu["params"]


def test_launcher_commands_resolve_from_path(tmp_path, monkeypatch):
    tool = tmp_path / "accelerate"
    tool.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    tool.chmod(0o755)
    binary = tmp_path / "notpython"
    binary.write_text("#!/bin/sh\necho hi\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    assert resolve_script("accelerate") == str(tool)
    assert resolve_script("notpython") is None  # not a Python program
    assert resolve_script("no-such-command-here") is None
    script = tmp_path / "train.py"
    script.write_text("")
    assert resolve_script(str(script)) == str(script)


@pytest.mark.parametrize(
    ("script", "args", "workers"),
    [
        ("/venv/bin/accelerate", ["launch", "--num_processes", "2", "t.py"], 2),
        ("/venv/bin/accelerate", ["launch", "--num_processes=4", "t.py"], 4),
        ("/venv/bin/torchrun", ["--nproc-per-node", "3", "t.py"], 3),
        ("/venv/bin/torchrun", ["--nproc_per_node=2", "t.py"], 2),
        ("/venv/bin/accelerate", ["launch", "t.py"], None),
        ("train.py", ["--num_processes", "2"], None),  # a script's own option
    ],
)
def test_launcher_worker_count(script, args, workers):
    assert launcher_workers(script, args) == workers
