"""``npu-migrate launch``: dry run, --write, --check, idempotency, configuration, errors."""

from __future__ import annotations

import os
import stat

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.launch.plan import TARGETS

from .conftest import read_files

ALL = ",".join(TARGETS)


def test_dry_run_prints_every_file_as_a_new_file_diff_and_writes_nothing(run_cli, project):
    result = run_cli("launch", "train.py", "--nodes", "2", "--cards", "8", "-t", ALL, "--image", "r/x:1",
                     "--", "--epochs", "3", cwd=project)
    assert result.exit_code == 0, result.output
    for name in ("torchrun.sh", "torch_npu_run.sh", "ranktable.sh", "modelarts.sh", "volcano-job.yaml"):
        assert f"--- /dev/null\n+++ b/launch/{name}\n" in result.stdout
    assert "train.py --epochs 3 \"$@\"" in result.stdout
    assert "nothing written (dry run)" in result.stderr
    assert not (project / "launch").exists()


def test_write_creates_executable_launchers_and_a_second_run_changes_nothing(run_cli, project):
    first = run_cli("launch", "train.py", "-t", ALL, "--image", "r/x:1", "--write", cwd=project)
    assert first.exit_code == 0, first.output
    files = read_files(project)
    assert set(files) == {"launch/torchrun.sh", "launch/torch_npu_run.sh", "launch/ranktable.sh",
                          "launch/modelarts.sh", "launch/volcano-job.yaml", "launch/ascendjob.yaml"}
    for name in files:
        mode = stat.S_IMODE(os.stat(project / name).st_mode)
        assert bool(mode & stat.S_IXUSR) == name.endswith(".sh"), (name, oct(mode))
    mtimes = {name: os.stat(project / name).st_mtime_ns for name in files}
    second = run_cli("launch", "train.py", "-t", ALL, "--image", "r/x:1", "--write", cwd=project)
    assert second.exit_code == 0
    assert "0 new, 0 changed, 6 unchanged" in second.stderr
    assert read_files(project) == files
    assert {name: os.stat(project / name).st_mtime_ns for name in files} == mtimes
    check = run_cli("launch", "train.py", "-t", ALL, "--image", "r/x:1", "--check", cwd=project)
    assert check.exit_code == 0 and check.stdout == ""


def test_check_exits_1_when_a_launcher_is_stale_and_write_brings_it_back_keeping_its_mode(run_cli, project):
    assert run_cli("launch", "train.py", "--write", cwd=project).exit_code == 0
    launcher = project / "launch" / "torchrun.sh"
    original = launcher.read_bytes()
    launcher.write_bytes(original.replace(b"NNODES:-1", b"NNODES:-3"))
    os.chmod(launcher, 0o700)
    check = run_cli("launch", "train.py", "--check", cwd=project)
    assert check.exit_code == 1
    assert "would update: launch/torchrun.sh" in check.stderr
    dry = run_cli("launch", "train.py", cwd=project)
    assert "-NNODES=${NNODES:-3}\n+NNODES=${NNODES:-1}" in dry.stdout
    assert run_cli("launch", "train.py", "--write", cwd=project).exit_code == 0
    assert launcher.read_bytes() == original
    assert stat.S_IMODE(os.stat(launcher).st_mode) == 0o700


def test_settings_come_from_pyproject_and_flags_replace_them(run_cli, project):
    (project / "scripts").mkdir()
    (project / "scripts" / "train.py").write_text("pass\n", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[tool.npu-migrate]\nselect = ["NPU"]\n\n[tool.npu-migrate.launch]\nentry = "scripts/train.py"\n'
        'args = ["--config", "big run.yaml"]\nnodes = 4\ncards = 8\ntargets = ["torchrun", "volcano"]\n'
        'image = "registry.example.com/team/train:1.0"\njob-name = "resnet"\nout = "deploy/launch"\n'
        'env = { HCCL_BUFFSIZE = "200" }\n', encoding="utf-8")
    result = run_cli("launch", "--nodes", "2", "--env", "TASK_QUEUE_ENABLE=2", "--write", cwd=project)
    assert result.exit_code == 0, result.output
    launcher = (project / "deploy/launch/torchrun.sh").read_text(encoding="utf-8")
    assert "NNODES=${NNODES:-2}" in launcher
    assert "scripts/train.py --config 'big run.yaml' \"$@\"" in launcher
    assert 'cd "$(dirname "${BASH_SOURCE[0]}")/../.."' in launcher
    assert "export HCCL_BUFFSIZE=${HCCL_BUFFSIZE:-200}" in launcher
    assert "export TASK_QUEUE_ENABLE=${TASK_QUEUE_ENABLE:-2}" in launcher
    job = yaml.safe_load((project / "deploy/launch/volcano-job.yaml").read_text(encoding="utf-8"))
    assert job["metadata"]["name"] == "resnet"
    assert job["spec"]["minAvailable"] == 2
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert container["args"] == ['NODE_RANK="$VC_TASK_INDEX" exec bash deploy/launch/torchrun.sh']
    # The same configuration read from elsewhere in the project produces the same bytes.
    assert run_cli("launch", "--nodes", "2", "--env", "TASK_QUEUE_ENABLE=2", "--check",
                   cwd=project / "scripts").exit_code == 0


def test_the_migration_ignores_the_launch_table_and_still_rejects_unknown_keys(run_cli, project):
    (project / "pyproject.toml").write_text('[tool.npu-migrate]\nbogus = 1\n[tool.npu-migrate.launch]\nentry = "train.py"\n',
                                            encoding="utf-8")
    assert run_cli(".", cwd=project).exit_code == 2
    (project / "pyproject.toml").write_text('[tool.npu-migrate.launch]\nentry = "train.py"\n', encoding="utf-8")
    assert run_cli(".", cwd=project).exit_code == 0


@pytest.mark.parametrize(
    ("args", "toml", "message"),
    [
        (["launch"], None, "no entry script"),
        (["launch", "missing.py"], None, "ENTRY: no such file"),
        (["launch", "train.py", "--cards", "9"], None, "--cards=9: an Ascend training server runs 1, 2, 4 or 8 NPUs"),
        (["launch", "train.py", "--cards", "3"], None, "--cards=3: an Ascend training server runs 1, 2, 4 or 8 NPUs"),
        (["launch", "train.py", "--cards", "32"], None, "(16 on a 16-NPU server: Atlas 200T A2 Box16, Atlas A3)"),
        (["launch", "train.py", "--cards", "0"], None, "--cards=0: an Ascend training server runs"),
        (["launch", "train.py", "--cards", "5"], None, "--cards=5: an Ascend training server runs"),
        (["launch", "train.py", "--cards=-1"], None, "--cards=-1: an Ascend training server runs"),
        (["launch", "train.py", "--cards", "eight"], None, "--cards must be an integer, got 'eight'"),
        (["launch", "train.py", "--nodes", "two"], None, "--nodes must be an integer, got 'two'"),
        (["launch", "train.py", "--nodes=-2"], None, "--nodes must be between 1 and 4096"),
        (["launch", "train.py", "--master-port", "http"], None, "--master-port must be an integer, got 'http'"),
        # More NPUs than the chosen servers have: the pods would stay Pending.
        (["launch", "train.py", "--cards", "16", "--accelerator", "ascend-910"], None,
         "--cards=16: accelerator-type module (from --accelerator=ascend-910) servers have 8 NPUs"),
        (["launch", "train.py", "--cards", "16", "--accelerator-type", "module-910b-8"], None,
         "--accelerator-type=module-910b-8 servers have 8 NPUs"),
        (["launch", "train.py", "--cards", "4", "--accelerator-type", "card-910b-2"], None,
         "--accelerator-type=card-910b-2 servers have 2 NPUs (a pod asking more is never scheduled); ask for at most 2"),
        # Atlas 800 training servers: a multi-node job's pods must each take the whole server.
        (["launch", "train.py", "--nodes", "2", "--cards", "4", "--accelerator", "ascend-910", "-t", "volcano",
          "--image", "r/x:1"], None, ("--cards=4 on 2 nodes: Volcano's Ascend plugin schedules a multi-node volcano "
                                      "job on module servers (Atlas 800 training) only when every pod asks for the "
                                      "whole server's 8 NPUs")),
        (["launch", "train.py", "--nodes", "3", "--cards", "2", "--accelerator-type", "half", "-t", "volcano",
          "--image", "r/x:1"], None, "multi-node volcano job on half servers"),
        # The operator's ranktable names host NPU ids; the per-card launcher counts 0..C-1 in the pod.
        (["launch", "train.py", "--cards", "4", "-t", "ascendjob", "--image", "r/x:1"], None,
         ("--cards=4: the ascendjob target takes whole servers (8 NPUs on module-910b-8): the operator's ranktable "
          "names each NPU by its id on the host")),
        (["launch", "train.py", "--cards", "16", "--host-arch", "huawei-arm"], None,
         "--host-arch=huawei-arm: module-910b-16 servers (Atlas 200T A2 Box16) have x86 hosts"),
        (["launch"], 'entry = "train.py"\ncards = 16\naccelerator-type = "half"\n',
         "[tool.npu-migrate.launch] accelerator-type=half servers have 4 NPUs"),
        (["launch", "train.py", "--nodes", "4097"], None, "--nodes must be between 1 and 4096"),
        (["launch", "train.py", "--max-restarts", "-1"], None, "--max-restarts must be between 0 and 100"),
        (["launch", "train.py", "--host-arch", "aarch64"], None, "huawei-arm or huawei-x86"),
        (["launch", "train.py", "-t", "ascendjob"], None, "the ascendjob target needs the training image"),
        (["launch"], 'entry = "train.py"\ncards = 6\n', "[tool.npu-migrate.launch] cards=6: an Ascend training"),
        (["launch", "train.py", "--nodes", "0"], None, "--nodes must be between 1 and 4096"),
        (["launch", "train.py", "-t", "slurm"], None, "unknown target 'slurm'"),
        (["launch", "train.py", "-t", "volcano"], None, "the volcano target needs the training image"),
        (["launch", "train.py", "--job-name", "Bad_Name"], None, "must be a lowercase DNS label"),
        (["launch", "train.py", "--env", "MA_X=1"], None, "starts with MA_"),
        (["launch", "train.py", "--out", "."], None, "must be a directory below the project root"),
        (["launch"], 'entry = "train.py"\nnodez = 2\n', "unknown key(s) in [tool.npu-migrate.launch]: nodez"),
        (["launch"], 'entry = "train.py"\ncards = "8"\n', "[tool.npu-migrate.launch] cards must be an integer"),
        (["launch"], 'entry = "../train.py"\n', "is outside the project root"),
    ],
)
def test_bad_settings_give_one_line_and_exit_2_writing_nothing(run_cli, project, args, toml, message):
    if toml is not None:
        (project / "pyproject.toml").write_text("[tool.npu-migrate.launch]\n" + toml, encoding="utf-8")
    result = run_cli(*args, "--write", cwd=project)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not (project / "launch").exists()


@pytest.mark.parametrize(("args", "selector"), [
    ((), "module-910b-8"), (("--cards", "16"), "module-910b-16\n          host-arch: huawei-x86"),
    (("--cards", "16", "--accelerator-type", "module-a3-16"), "module-a3-16"),
    (("--cards", "16", "--accelerator-type", "site-label"), "site-label"),  # a label of the site's own: not checked
    (("--cards", "8", "--accelerator", "ascend-910"), "module"),
])
def test_counts_the_servers_have_are_accepted(run_cli, project, args, selector):
    result = run_cli("launch", "train.py", "-t", "volcano", "--image", "r/x:1", *args, "--write", cwd=project)
    assert result.exit_code == 0, result.stderr
    assert f"accelerator-type: {selector}\n" in (project / "launch" / "volcano-job.yaml").read_text(encoding="utf-8")


def test_pods_taking_part_of_a_server_are_a_warning_on_910b(run_cli, project):
    result = run_cli("launch", "train.py", "--nodes", "2", "--cards", "4", "-t", "volcano", "--image", "r/x:1",
                     "--write", cwd=project)
    assert result.exit_code == 0, result.stderr
    assert ("warning: each of the 2 pods asks for 4 of the 8 NPUs of a module-910b-8 server; some releases of "
            "Volcano's Ascend plugin schedule a multi-node job only on whole servers (--cards 8)") in result.stderr
    # One node, or the whole server: no warning; launchers alone: the scheduler is not involved.
    for args in (("--nodes", "1", "--cards", "4", "-t", "volcano", "--image", "r/x:1"),
                 ("--nodes", "2", "--cards", "8", "-t", "volcano", "--image", "r/x:1"),
                 ("--nodes", "2", "--cards", "4", "--accelerator", "ascend-910", "-t", "torchrun")):
        result = run_cli("launch", "train.py", *args, "--out", "other", "--write", cwd=project)
        assert result.exit_code == 0 and "warning" not in result.stderr, (args, result.stderr)


def test_a_directory_in_the_way_is_one_error(run_cli, project):
    (project / "launch" / "torchrun.sh").mkdir(parents=True)
    result = run_cli("launch", "train.py", "--write", cwd=project)
    assert result.exit_code == 2
    assert "launch/torchrun.sh: is a directory" in result.stderr


def test_volcano_also_writes_the_torchrun_launcher_its_pods_run(run_cli, project):
    result = run_cli("launch", "train.py", "-t", "volcano", "--image", "r/x:1", "--write", cwd=project)
    assert result.exit_code == 0
    assert set(read_files(project)) == {"launch/torchrun.sh", "launch/volcano-job.yaml"}


def test_modelarts_boot_command_is_printed(run_cli, project):
    result = run_cli("launch", "train.py", "-t", "modelarts", cwd=project)
    assert f'ModelArts boot command: bash "${{MA_JOB_DIR}}"/{project.name}/launch/modelarts.sh' in result.stderr


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(_text, max_size=4), nodes=st.integers(1, 64), cards=st.sampled_from([1, 2, 4, 8]))
def test_generation_is_deterministic_and_a_rewrite_is_a_no_op(run_cli, project, args, nodes, cards):
    # An AscendJob takes whole servers (8 NPUs here); every other target takes any count.
    targets = ALL if cards == 8 else ",".join(t for t in TARGETS if t != "ascendjob")
    base = ["launch", "train.py", "-t", targets, "--image", "r/x:1", "--nodes", str(nodes), "--cards", str(cards)]
    assert run_cli(*base, "--write", "--", *args, cwd=project).exit_code == 0
    first = read_files(project)
    assert run_cli(*base, "--write", "--", *args, cwd=project).exit_code == 0
    assert read_files(project) == first
    assert run_cli(*base, "--check", "--", *args, cwd=project).exit_code == 0


def test_ranktable_target_warns_when_the_entry_lacks_the_runtime(run_cli, project):
    warned = run_cli("launch", "train.py", "-t", "ranktable", cwd=project)
    assert warned.exit_code == 0 and "warning: train.py does not use npu_runtime" in warned.stderr
    (project / "train.py").write_text("import npu_runtime\nnpu_runtime.install()\n", encoding="utf-8")
    assert "warning" not in run_cli("launch", "train.py", "-t", "ranktable", cwd=project).stderr
