"""``npu-migrate verify`` end to end: real twins, real processes (slow; tiny models, 1-3 steps).

Correct migrations pass; planted wrong migrations (a rule switched off with
--ignore) fail with the right first diverging step; the user's tree is untouched.
Each test is one verify run, its twins at the same time (--jobs 2): the cost is
the processes (each imports torch), so every run checks all it can.
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
    proc = subprocess.run([sys.executable, "-m", "npu_migrate", "verify", "--jobs", "2", "--report", str(report),
                           *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    data = json.loads(report.read_text()) if report.is_file() else {}
    return proc, data


def _copy(name: str, tmp_path: Path) -> Path:
    if name == "cuda_project":
        return Path(shutil.copytree(REPO / "examples" / "cuda_project", tmp_path / name))
    return Path(shutil.copytree(PROJECTS / name, tmp_path / name))


@pytest.mark.timeout(900)
def test_amp_with_scaler_and_resume_passes_and_the_tree_is_untouched(tmp_path, emulator_build):
    project = _copy("amp_resume", tmp_path)
    before = _snapshot(project)
    proc, data = _verify(project, "--steps", "3", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["verdict"] == "pass" and data["precision"]["mode"] == "fp16 autocast, same device"
    assert [row["step"] for row in data["steps"]] == [1, 2, 3]
    assert [row["migrated"]["scale"] for row in data["steps"]] == [32.0, 64.0, 128.0]
    assert all(row["reference"]["losses"] and row["migrated"]["losses"] for row in data["steps"])
    resume = data["resume"]  # two steps per epoch: the checkpoint after step 2
    assert resume["status"] == "pass" and resume["stopped_after"] == 2 and resume["migrated"]["status"] == "exact"
    assert (tmp_path / "report" / "verify.png").is_file() and (tmp_path / "report" / "verify.txt").is_file()
    assert _snapshot(project) == before


@pytest.mark.timeout(900)
def test_scaler_state_not_restored_as_in_the_original_passes(tmp_path, emulator_build):
    # NPU401 (scaler state in checkpoints) is a device-neutral fix: ignored, it is left out of
    # both twins, and the migrated twin's restart computes what the original's restart computes
    # (both lose the scale: the report says neither resume is exact).
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "3", "--ignore", "NPU401", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resume = data["resume"]
    assert resume["status"] == "pass"
    assert resume["reference"]["status"] == "not-exact" and resume["migrated"]["status"] == "not-exact"
    assert "GradScaler scale" in resume["reference"]["detail"]  # the scale restarts from init_scale


@pytest.mark.timeout(900)
def test_the_restart_runs_in_a_snapshot_instead_of_a_stop_run(tmp_path, emulator_build):
    # 4 steps: checkpoints after steps 2 and 4, so each twin's copy holds step 4's when its
    # run ends; the restart after step 2 runs in the snapshot each run took after step 2,
    # not in a fresh copy run to step 2 first. With NPU401 off neither twin's checkpoint
    # keeps the GradScaler's scale, so neither resume is exact and both twins restart.
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "4", "--ignore", "NPU401", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resume = data["resume"]
    assert resume["status"] == "pass" and resume["stopped_after"] == 2
    assert resume["reference"]["status"] == "not-exact" and resume["migrated"]["status"] == "not-exact"
    assert resume["restarted_from"] == {twin: "a snapshot its uninterrupted run took after step 2"
                                        for twin in ("reference", "migrated")}


@pytest.mark.timeout(900)
def test_an_exact_resume_of_agreeing_twins_needs_no_reference_restart(tmp_path, emulator_build):
    # The twins agree bit for bit and the migrated twin's restart (from its snapshot after
    # step 2) is bit-identical to its own uninterrupted run at steps 3 and 4: it computes
    # what the original's uninterrupted run computes there, and the reference's restart,
    # whatever it computed, could not change the verdict: it is not run.
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "4", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resume = data["resume"]
    assert resume["status"] == "pass" and resume["stopped_after"] == 2 and resume["migrated"]["status"] == "exact"
    assert resume["reference_restart"] == ("reference restart not needed: the migrated resume is exact and the "
                                           "twins agree exactly")
    assert resume["reference"]["status"] == "not-run"
    assert resume["restarted_from"] == {"reference": "not run",
                                        "migrated": "a snapshot its uninterrupted run took after step 2"}
    # the restarted migrated twin against the reference's uninterrupted run, bit for bit
    rows = {row["step"]: row for row in resume["steps"]}
    assert sorted(rows) == [3, 4] and not any(row["diverged"] for row in rows.values())
    full = {row["step"]: row["reference"] for row in data["steps"]}
    assert all(rows[step]["reference"] == full[step] and rows[step]["migrated"]["digest"] == full[step]["digest"]
               for step in (3, 4))
    started = [entry for entry in data["fork_server"] if "restarted" in entry]
    assert started and not any(entry.startswith("reference") for entry in started), data["fork_server"]
    assert "reference restart not needed" in (tmp_path / "report" / "verify.txt").read_text()


@pytest.mark.timeout(900)
def test_a_resume_that_is_not_exact_still_restarts_the_reference(tmp_path, emulator_build):
    # The RNG state is not restored (as in nanoGPT and llama2.c): each restart shuffles its
    # next epoch as the first, so neither resume is exact; the reference restarts, and the
    # verdict compares the two restarts as before.
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "3", "train.py", "--", "--no-rng-state")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resume = data["resume"]
    assert resume["status"] == "pass" and resume["stopped_after"] == 2
    assert resume["reference"]["status"] == "not-exact" and resume["migrated"]["status"] == "not-exact"
    assert resume["reference_restart"].startswith("run: the migrated twin's resume is not exact (not-exact: ")
    assert [row["step"] for row in resume["steps"]] == [3] and not resume["steps"][0]["diverged"]


@pytest.mark.timeout(900)
def test_a_script_that_writes_while_it_unwinds_gets_a_stop_run(tmp_path, emulator_build):
    # The same with a file written in a `finally:`: a run stopped after step 2 would have
    # it, the snapshot taken at that point does not, so each twin is run to step 2 first.
    project = _copy("amp_resume", tmp_path)
    # (NPU401 off: neither resume is exact, so both twins restart)
    proc, data = _verify(project, "--steps", "4", "--ignore", "NPU401", "train.py", "--", "--exit-note", "note.txt")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resume = data["resume"]
    assert resume["status"] == "pass" and resume["stopped_after"] == 2
    assert resume["restarted_from"] == {
        twin: "a fresh copy run to step 2 first (the script wrote into its copy while it unwound from the stop)"
        for twin in ("reference", "migrated")}


@pytest.mark.timeout(900)
def test_a_restart_the_original_itself_cannot_do_names_its_line_and_keeps_the_logs(tmp_path, emulator_build):
    # facebookresearch/dino saves its argparse Namespace in the checkpoint, and its restart's
    # torch.load (weights_only by default since torch 2.6) refuses it, in both twins alike:
    # the verdict stands, and the round-trip says where the original's restart fails, that
    # the migrated twin's fails there too, and where the restarts' logs are.
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--steps", "3", "train.py", "--", "--save-args")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["verdict"] == "pass"
    resume = data["resume"]
    assert resume["status"] == "reference-failed"
    detail = resume["detail"][0]
    assert "at train.py:38 (line 38 after the migration) state = torch.load(args.checkpoint" in detail, detail
    assert "the migrated twin's restart fails there too" in detail and "\x1b" not in detail
    kept = Path(resume["logs"]["reference"])
    assert kept.parent == tmp_path / "report" and "UnpicklingError" in kept.read_text()
    assert str(kept) in detail and Path(resume["logs"]["migrated"]).is_file()
    assert "train.py:38 (line 38 after the migration)" in (tmp_path / "report" / "verify.txt").read_text()


@pytest.mark.timeout(600)
def test_silent_cpu_work_fails(tmp_path, emulator_build):
    project = _copy("amp_resume", tmp_path)
    # torch.cuda.is_available() left as it is: False on the NPU machine, so the model stays on the CPU
    proc, data = _verify(project, "--steps", "1", "--no-resume", "--ignore", "NPU101", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["silent_cpu"] and data["first_divergence"]["step"] == 1
    assert "silent CPU work" in data["reason"]


@pytest.mark.timeout(600)
def test_dropped_npu_call_in_the_example_project_fails_at_step_one(tmp_path, emulator_build):
    project = _copy("cuda_project", tmp_path)
    before = _snapshot(project)
    proc, data = _verify(project, "--steps", "1", "--no-resume", "--ignore", "NPU103", "train.py", "--",
                         "--epochs", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["twins"]["reference"]["status"] == "ok" and data["twins"]["reference"]["steps"] == {"0": 1}  # the reference ran
    assert data["verdict"] == "fail" and data["first_divergence"]["step"] == 1
    assert "CUDA" in data["reason"]  # the leftover .cuda(): "Torch not compiled with CUDA enabled"
    assert _snapshot(project) == before


@pytest.mark.timeout(900)
def test_ddp_two_processes_with_nccl_left_fail_at_the_users_frame(tmp_path, emulator_build):
    project = _copy("ddp", tmp_path)
    proc, data = _verify(project, "--nproc", "2", "--steps", "3", "--no-resume", "--ignore", "NPU201", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["launch"] == "torchrun" and data["twins"]["reference"]["status"] == "ok"
    frame = data["twins"]["migrated"]["frame"]
    assert frame.startswith("train.py:") and "init_process_group" in frame
    assert proc.stdout.splitlines()[1].strip() == frame  # the user's own frame first
    log = data["logs"]["migrated twin"]
    assert Path(log).is_file() and log.endswith("verify.migrated.log")  # next to the report, outlives the scratch
    paths = data["paths"]["reference"]["0"]
    assert paths["process_group"]["backend"] == "hccl" and paths["wrappers"] == ["DistributedDataParallel"]


@pytest.mark.timeout(900)
def test_spawned_ddp_two_processes_with_resume_pass(tmp_path, emulator_build):
    project = _copy("ddp_spawn", tmp_path)
    proc, data = _verify(project, "--nproc", "2", "--steps", "3", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["launch"] == "spawn" and data["precision"]["mode"] == "fp32"
    assert sorted((row["step"], row["rank"]) for row in data["steps"]) == [(s, r) for s in (1, 2, 3) for r in (0, 1)]
    assert all(row["reference"]["digest"] == row["migrated"]["digest"] for row in data["steps"])  # bit-exact
    resume = data["resume"]
    assert resume["status"] == "pass" and resume["stopped_after"] == 2
    assert resume["migrated"]["status"] == "exact" and {(row["step"], row["rank"]) for row in resume["steps"]} == {
        (3, 0), (3, 1)}
    # bit-identical twins, an exact migrated resume: the reference's restart (two more
    # processes) is not needed
    assert resume["reference_restart"].startswith("reference restart not needed")
    assert resume["reference"]["status"] == "not-run"


@pytest.mark.timeout(900)
def test_spawned_ddp_whose_checkpoint_is_loaded_onto_cuda_fails_at_the_restart(tmp_path, emulator_build):
    # Negative control for the round-trip: NPU104 off leaves torch.load's
    # map_location=f"cuda:{gpu}" in the migrated twin. The uninterrupted twins agree bit
    # for bit (the first run loads nothing), the migrated twin's restart fails, so the
    # reference restarts too (it resumes exactly) and the verdict is FAIL at the restart.
    project = _copy("ddp_spawn", tmp_path)
    proc, data = _verify(project, "--nproc", "2", "--steps", "3", "--ignore", "NPU104", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["verdict"] == "fail" and data["reason"].startswith("resume round-trip: ")
    resume = data["resume"]
    assert resume["status"] == "fail" and resume["reference_restart"] == "run: the migrated twin's restart failed"
    assert "map_location" in resume["detail"][0] and data["first_divergence"]["step"] == 3
    assert not any(row["diverged"] for row in data["steps"])  # the uninterrupted twins agree


@pytest.mark.timeout(900)
def test_spawned_ddp_with_cuda_left_in_the_worker_fails(tmp_path, emulator_build):
    # NPU103 off: the worker's .cuda(gpu) stays CUDA in the migrated twin; the reference
    # (the original, CUDA served by the emulated NPU) trains: the migrated twin fails at step 1
    project = _copy("ddp_spawn", tmp_path)
    proc, data = _verify(project, "--nproc", "2", "--steps", "2", "--no-resume", "--ignore", "NPU103", "train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["launch"] == "spawn" and data["twins"]["reference"]["status"] == "ok"
    assert data["first_divergence"]["step"] == 1
    assert ".cuda(" in (data["twins"]["migrated"]["frame"] or "")


@pytest.mark.timeout(600)
def test_the_cpu_retarget_reference_is_kept_on_request(tmp_path, emulator_build):
    project = _copy("amp_resume", tmp_path)
    proc, data = _verify(project, "--reference", "cpu-retarget", "--steps", "2", "--no-resume", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["precision"]["mode"] == "fp16 autocast" and "cpu-retarget" in data["reference"]
    assert not data["path_differences"]  # the CPU's autocast and device are the npu's, renamed


@pytest.mark.timeout(900)
def test_hand_updated_parameters_are_steps_counted_by_backward(tmp_path, emulator_build):
    # pytorch/examples word_language_model's loop without --use-optimizer: no torch.optim
    # optimizer, p.data.add_(p.grad, alpha=-lr). Each backward() is a step; the parameters
    # after the script's own update are compared.
    project = _copy("manual_sgd", tmp_path)
    proc, data = _verify(project, "--steps", "3", "--no-resume", "train.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["verdict"] == "pass" and data["steps_counted_by"] == "backward"
    assert [row["step"] for row in data["steps"]] == [1, 2, 3]
    for row in data["steps"]:
        ref, got = row["reference"], row["migrated"]
        assert ref["digest"] == got["digest"] and ref["grad_norm"] == got["grad_norm"] is not None
        assert ref["grad_norm_clip"] is not None  # clip_grad_norm_ before the update
    rank0 = json.loads((project.parent / "report" / "verify.json").read_text())["twins"]["migrated"]["steps"]
    assert rank0 == {"0": 3}
    assert "steps: counted by backward()" in proc.stdout


@pytest.mark.timeout(900)
def test_an_optimizer_after_hand_updated_steps_is_no_verdict(tmp_path, emulator_build):
    project = _copy("manual_sgd", tmp_path)
    proc, data = _verify(project, "--steps", "3", "--no-resume", "train.py", "--", "--late-optimizer")
    assert proc.returncode == 2 and data["verdict"] == "error", proc.stdout + proc.stderr
    assert "train.py:28 optimizer.step()" in data["reason"] and "counted this script's steps by backward()" in (
        data["reason"])


def _masked(text: str) -> list[str]:
    """Lines with every number and scratch name masked: the figures are the CPU's (another
    CPU may round the emulated kernels differently); the lines, symbols and legend are verify's."""
    import re

    text = re.sub(r"npu-migrate-verify-logs-[\w]+", "LOGS", text)
    return [re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", line).rstrip() for line in text.splitlines()]


@pytest.mark.timeout(900)
def test_the_readmes_verify_example_prints_what_the_readme_shows(tmp_path, emulator_build):
    # README, "To prove a migration before writing it": the command as a new user runs it
    # in a fresh copy of examples/ (resume round-trip, unscaled figures, legend, paths).
    readme = (REPO / "README.md").read_text("utf-8")
    command = "npu-migrate verify train.py --steps 17 --report /tmp/v/report.json -- --epochs 2"
    assert f"cd examples/cuda_project && {command}\n" in readme
    at = readme.index("It prints (stdout;")
    start = readme.index("```\n", at) + 4
    shown = readme[start:readme.index("```", start)]
    project = _copy("cuda_project", tmp_path)
    proc, data = _verify(project, "--steps", "17", "train.py", "--", "--epochs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = proc.stdout.replace(str(tmp_path / "report" / "verify"), "/tmp/v/report")
    assert _masked(printed) == _masked(shown)
    assert data["resume"]["status"] == "pass" and data["resume"]["stopped_after"] == 16
