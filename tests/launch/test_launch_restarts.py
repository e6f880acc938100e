"""What the shell launchers do around the training processes: the CANN environment before
Python starts, HCCL timeouts from the entry script, and restarts by exit class
(npu_runtime.exitcodes) with the diagnosis printed before each decision. ``PYTHON`` is the
recorder of test_launch_scripts.py (it also stands in for torchrun and for
``python -m npu_runtime.diagnose``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from npu_migrate.launch.plan import build_plan
from npu_migrate.launch.targets import render

from .test_launch_scripts import _run, _write, recorder  # noqa: F401  (a fixture)

pytestmark = pytest.mark.timeout(120)


def _entries(calls, script):
    return [c for c in calls if (c["argv"][:1] == ["train.py"]) or c["argv"][:2] == ["-m", "torch.distributed.run"]]


@pytest.mark.parametrize(("code", "attempts", "said"), [
    (75, 3, "exit 75 (hang"), (76, 3, "exit 76 (health stop"), (77, 3, "exit 77 (hardware fault"),
    (3, 3, "exit 3 (not classified by the runtime)"), (78, 1, "exit 78 (fatal: a restart would fail the same way)"),
])
@pytest.mark.parametrize("script", ["ranktable.sh", "torchrun.sh"])
def test_restarts_follow_the_exit_class(project, recorder, script, code, attempts, said):  # noqa: F811
    out = _write(project, nodes=1, cards=1)
    proc, calls = _run(out / script, recorder, {"RANK_TABLE_FILE": "/x.json", "EXIT_CODE": str(code),
                                                "NPU_MAX_RESTARTS": "2"})
    assert proc.returncode == code, proc.stderr
    assert len(_entries(calls, script)) == attempts, calls
    assert said in proc.stderr
    if attempts > 1:
        assert "restarting (1 of 2)" in proc.stderr and "restarting (2 of 2)" in proc.stderr
        assert "no restart left (2 of NPU_MAX_RESTARTS=2 used)" in proc.stderr
    else:
        assert "restarting (" not in proc.stderr and "not restarting" in proc.stderr


@pytest.mark.parametrize("script", ["ranktable.sh", "torchrun.sh"])
def test_the_diagnosis_is_printed_before_the_restart_decision(project, recorder, script):  # noqa: F811
    out = _write(project, nodes=1, cards=2)
    proc, _ = _run(out / script, recorder, {"RANK_TABLE_FILE": "/x.json", "EXIT_CODE": "77", "NPU_MAX_RESTARTS": "1"})
    logs = "rank_0.log rank_1.log" if script == "ranktable.sh" else "node_0.log"
    first = proc.stderr.index(f"FAKE DIAGNOSIS of {logs}")
    assert first < proc.stderr.index("restarting (1 of 1)")
    assert proc.stderr.index("FAKE DIAGNOSIS", first + 1) < proc.stderr.index("no restart left")


def test_without_the_diagnose_module_the_exit_status_decides(project, recorder):  # noqa: F811
    out = _write(project, nodes=1, cards=1)
    proc, _ = _run(out / "torchrun.sh", recorder, {"EXIT_CODE": "78", "NO_DIAGNOSE": "1"})
    assert proc.returncode == 78
    assert "npu_runtime.diagnose is not installed: no diagnosis, the exit status decides" in proc.stderr
    assert "FAKE DIAGNOSIS" not in proc.stdout + proc.stderr


def test_a_success_is_not_restarted(project, recorder):  # noqa: F811
    out = _write(project, nodes=1, cards=2)
    proc, calls = _run(out / "ranktable.sh", recorder, {"RANK_TABLE_FILE": "/x.json"})
    assert proc.returncode == 0 and len(calls) == 2 and "diagnos" not in proc.stderr


# --- the CANN environment ---------------------------------------------------------------


def _toolkit(tmp_path):
    """A CANN install: <root>/ascend-toolkit/set_env.sh next to latest/, as the toolkit lays it out.
    Like the real one, it reads variables that may be unset (strict mode would stop on them)."""
    home = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    home.mkdir(parents=True)
    (home.parent / "set_env.sh").write_text(
        f'export LD_LIBRARY_PATH={home}/lib64:$LD_LIBRARY_PATH_UNSET_HERE\n'
        f'export ASCEND_HOME_PATH={home}\nexport CANN_MARK=sourced\n', encoding="utf-8")
    return home


@pytest.mark.parametrize("script", ["torchrun.sh", "torch_npu_run.sh", "ranktable.sh", "modelarts.sh"])
def test_launchers_source_cann_before_python_starts(project, recorder, tmp_path, script):  # noqa: F811
    home = _toolkit(tmp_path)
    out = _write(project, nodes=1, cards=1)
    proc, calls = _run(out / script, recorder, {"ASCEND_TOOLKIT_HOME": str(home), "RANK_TABLE_FILE": "/x.json"})
    assert proc.returncode == 0, proc.stderr
    assert f"sourcing the CANN environment from {home}/../set_env.sh" in proc.stderr
    assert calls and all(c["env"]["CANN_MARK"] == "sourced" and c["env"]["ASCEND_HOME_PATH"] == str(home)
                         for c in calls)


def test_an_environment_that_has_cann_is_left_alone(project, recorder, tmp_path):  # noqa: F811
    home = _toolkit(tmp_path)
    out = _write(project, nodes=1, cards=1)
    proc, [call] = _run(out / "torchrun.sh", recorder, {"ASCEND_TOOLKIT_HOME": str(home), "ASCEND_HOME_PATH": "/mine"})
    assert proc.returncode == 0, proc.stderr
    assert call["env"]["ASCEND_HOME_PATH"] == "/mine" and call["env"]["CANN_MARK"] is None
    assert "CANN" not in proc.stderr


def test_no_cann_is_said_clearly(project, recorder):  # noqa: F811
    out = _write(project, nodes=1, cards=1)
    proc, _ = _run(out / "torchrun.sh", recorder, {"ASCEND_TOOLKIT_HOME": "/nowhere", "HOME": "/nowhere"})
    assert "launcher: no CANN environment: ASCEND_HOME_PATH is unset and no set_env.sh was found" in proc.stderr


def _set_env(path: Path, home: Path) -> None:
    """A CANN package's set_env.sh (toolkit or nnae) that marks where it was sourced from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"export ASCEND_HOME_PATH={home}\nexport CANN_MARK={path}\n", encoding="utf-8")


def test_the_nnae_package_is_sourced_where_no_toolkit_is(project, recorder, tmp_path):  # noqa: F811
    """Training images often carry only nnae, CANN's deployment package (Ascend's model-zoo
    env_npu.sh sources nnae/set_env.sh where ascend-toolkit is missing)."""
    nnae = tmp_path / "user" / "Ascend" / "nnae" / "set_env.sh"
    _set_env(nnae, nnae.parent / "latest")
    out = _write(project, nodes=1, cards=1)
    proc, [call] = _run(out / "torchrun.sh", recorder, {"HOME": str(tmp_path / "user")})
    assert proc.returncode == 0, proc.stderr
    assert f"sourcing the CANN environment from {nnae}" in proc.stderr and "no CANN" not in proc.stderr
    assert call["env"]["CANN_MARK"] == str(nnae)


@pytest.mark.parametrize("package", ["ascend-toolkit", "nnae"])
def test_the_install_root_cann_recorded_is_used(project, recorder, tmp_path, package):  # noqa: F811
    """CANN's installer records a non-default root in /etc/Ascend/ascend_cann_install.info
    (Install_Path=...); the launcher reads it (here from a copy, the script pointed at it)."""
    root = tmp_path / "opt" / "cann"
    _set_env(root / package / "set_env.sh", root / package / "latest")
    info = tmp_path / "ascend_cann_install.info"
    info.write_text(f"Install_Path={root}\n", encoding="utf-8")
    out = _write(project, nodes=1, cards=1)
    script = out / "torchrun.sh"
    text = script.read_text(encoding="utf-8")
    assert "sed -n 's/^Install_Path=//p' /etc/Ascend/ascend_cann_install.info" in text
    script.write_text(text.replace("/etc/Ascend/ascend_cann_install.info", str(info)), encoding="utf-8")
    proc, [call] = _run(script, recorder, {"HOME": "/nowhere"})
    assert proc.returncode == 0, proc.stderr
    assert call["env"]["CANN_MARK"] == str(root / package / "set_env.sh")


def test_an_unset_home_does_not_stop_the_launcher(project, recorder):  # noqa: F811
    out = _write(project, nodes=1, cards=1)
    env = {k: v for k, v in os.environ.items() if k != "HOME"}
    proc = subprocess.run(["env", "-u", "HOME", "bash", str(out / "torchrun.sh")], capture_output=True, text=True,
                          timeout=60, env={**env, "PYTHON": str(recorder), "NPU_PREFLIGHT": "0",
                                           "RECORD": str(out / "record.jsonl")}, cwd="/", check=False)
    assert proc.returncode == 0, proc.stderr
    assert "unbound variable" not in proc.stderr and "no CANN environment" in proc.stderr


# --- HCCL timeouts from the entry script --------------------------------------------------


@pytest.mark.parametrize(("timeout", "accelerator", "connect", "execute"), [
    (None, "ascend-910b", "1200", "1836"),
    ("timedelta(minutes=60)", "ascend-910b", "3600", "3604"),  # 53 x 68
    ("datetime.timedelta(hours=3)", "ascend-910b", "7200", "10812"),  # connect capped at 7200
    ("timedelta(seconds=30)", "ascend-910b", "120", "68"),  # connect at least 120
    ("timedelta(hours=6)", "ascend-910", "7200", "17340"),  # Atlas training series: at most 17340
    ("timedelta(hours=6)", "ascend-910b", "7200", "21624"),
    ("timedelta(seconds=args.timeout)", "ascend-910b", "1200", "1836"),  # computed: the defaults
])
def test_hccl_timeouts_follow_init_process_group(project, timeout, accelerator, connect, execute):
    call = f"dist.init_process_group('hccl', timeout={timeout})" if timeout else "dist.init_process_group('hccl')"
    (project / "train.py").write_text(f"import datetime\nfrom datetime import timedelta\n\n{call}\n", encoding="utf-8")
    plan = build_plan({}, {"entry": str(project / "train.py"), "accelerator": accelerator}, project)
    [launcher] = render(plan)
    assert f"HCCL_CONNECT_TIMEOUT=${{HCCL_CONNECT_TIMEOUT:-{connect}}}" in launcher.text
    assert f"HCCL_EXEC_TIMEOUT=${{HCCL_EXEC_TIMEOUT:-{execute}}}" in launcher.text
    assert int(execute) % 68 == 0 and 120 <= int(connect) <= 7200
    if timeout and "args" not in timeout:
        assert "train.py:4 init_process_group(timeout=" in launcher.text


@pytest.mark.parametrize(("source", "connect", "execute"), [
    ("TIMEOUT = timedelta(minutes=90)\n\ndist.init_process_group('hccl', timeout=TIMEOUT)\n", "5400", "5440"),
    # Bound twice (or changed later): not a constant, the defaults stay.
    (("TIMEOUT = timedelta(minutes=90)\nTIMEOUT = timedelta(minutes=5)\n"
      "dist.init_process_group('hccl', timeout=TIMEOUT)\n"), "1200", "1836"),
    (("TIMEOUT = timedelta(minutes=90)\n\ndef main(t):\n    TIMEOUT = t\n"
      "    dist.init_process_group('hccl', timeout=TIMEOUT)\n"), "1200", "1836"),
])
def test_hccl_timeouts_follow_a_module_constant(project, source, connect, execute):
    (project / "train.py").write_text(f"from datetime import timedelta\n{source}", encoding="utf-8")
    plan = build_plan({}, {"entry": str(project / "train.py")}, project)
    [launcher] = render(plan)
    assert f"HCCL_CONNECT_TIMEOUT=${{HCCL_CONNECT_TIMEOUT:-{connect}}}" in launcher.text
    assert f"HCCL_EXEC_TIMEOUT=${{HCCL_EXEC_TIMEOUT:-{execute}}}" in launcher.text


def test_max_restarts_sets_the_launchers_bound(project, recorder):  # noqa: F811
    plan = build_plan({}, {"entry": str(project / "train.py"), "max-restarts": 0, "targets": ["ranktable"]}, project)
    [launcher] = render(plan)
    assert "NPU_MAX_RESTARTS=${NPU_MAX_RESTARTS:-0}" in launcher.text
    path = project / launcher.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(launcher.text, encoding="utf-8")
    proc, calls = _run(path, recorder, {"RANK_TABLE_FILE": "/x.json", "EXIT_CODE": "75"})
    assert proc.returncode == 75 and "no restart left (0 of NPU_MAX_RESTARTS=0 used)" in proc.stderr


OOM_TRACEBACK = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                 "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 29.50 GiB total capacity)\n")
ECC_TEXT = ("[rank1]: RuntimeError: synchronize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:467 NPU function "
            "error: UCE ERROR., error code is 507053\n")


@pytest.mark.parametrize(("script", "worker_code"), [("ranktable.sh", "1"), ("torchrun.sh", "-6")])
@pytest.mark.parametrize(("text", "attempts", "final", "said"), [
    (OOM_TRACEBACK, 1, 78, "the diagnosed root cause's class is 78"),
    (ECC_TEXT, 3, 77, "the diagnosed root cause's class is 77"),
    ("Traceback (most recent call last):\nValueError: no such column\n", 3, 1, "(not classified by the runtime)"),
])
def test_an_unclassified_exit_takes_the_class_of_the_diagnosed_root_cause(
        project, recorder, script, worker_code, text, attempts, final, said):  # noqa: F811
    # The real diagnose on the real log: a traceback exits 1 (torchrun reports an abort as -6),
    # and an OOM must not burn the restarts while an ECC fault is still restarted.
    out = _write(project, nodes=1, cards=1)
    proc, calls = _run(out / script, recorder, {"RANK_TABLE_FILE": "/x.json", "EXIT_CODE": worker_code,
                                                "LOG_TEXT": text, "REAL_DIAGNOSE": "1", "NPU_MAX_RESTARTS": "2"})
    assert proc.returncode == final, proc.stderr
    assert len(_entries(calls, script)) == attempts, proc.stderr
    assert said in proc.stderr
    assert "launcher: diagnosis (python -m npu_runtime.diagnose):" in proc.stderr
    if final != 1:
        assert proc.stderr.index("(root cause)") < proc.stderr.index(said)  # the verdict is printed first


def test_a_runtime_class_is_not_overridden_by_the_diagnosis(project, recorder):  # noqa: F811
    out = _write(project, nodes=1, cards=1)
    proc, calls = _run(out / "torchrun.sh", recorder, {"EXIT_CODE": "76", "DIAGNOSED_CLASS": "78",
                                                       "NPU_MAX_RESTARTS": "1"})
    assert proc.returncode == 76 and len(_entries(calls, "torchrun.sh")) == 2, proc.stderr
    assert "diagnosed root cause's class" not in proc.stderr


@pytest.mark.timeout(240)
def test_the_diagnosis_of_a_large_hostile_log_is_bounded(project, recorder, tmp_path):  # noqa: F811
    """issue 38.3: the launcher's ``diagnose --exit-class`` after a failure, on 8 MB of the
    shapes that made a signature backtrack (60 KB lines of ``torch_npu`` and ``requires``:
    3 s each before), long runs of other patterns' first words and terminal escapes,
    with the OOM at the end: the verdict still comes, in bounded time."""
    import time

    hostile = ["torch_npu " + "requires " * 6600, "device " * 9000, "step 1 loss " * 5000,
               "exitcode : 7" * 5000, "\x1b]0;title\x07\x1b[2J" * 5000]
    log = tmp_path / "hostile.txt"
    with log.open("w", encoding="utf-8") as fh:
        for _ in range(28):
            fh.write("\n".join(hostile) + "\n")
        fh.write(OOM_TRACEBACK)
    assert log.stat().st_size > 8 << 20
    out = _write(project, nodes=1, cards=1)
    start = time.monotonic()
    proc, calls = _run(out / "torchrun.sh", recorder, {"EXIT_CODE": "-6", "LOG_FILE": str(log), "REAL_DIAGNOSE": "1",
                                                        "NPU_MAX_RESTARTS": "2"}, timeout=200)
    elapsed = time.monotonic() - start
    assert proc.returncode == 78, proc.stderr[-2000:]
    assert len(_entries(calls, "torchrun.sh")) == 1
    assert "the diagnosed root cause's class is 78" in proc.stderr
    assert elapsed < 60, elapsed
