"""Real processes, real signals: Ctrl-C stops a run at once and writes nothing more,
SIGKILL never leaves a partial file (and the next run removes the temp file it
left), and a native crash in the parser fails one file, not the run.

Faults are injected with a ``sitecustomize`` module (tests/engine/faults.py), so
the run waits at a known point before the signal is sent. The timeouts only
catch hangs; they are no speed goal (bench/faults.py measures the latency).
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.engine.faults import (
    CONSOLE_SCRIPT,
    faulty_env,
    kill_group,
    start,
    wait_for,
    wait_gone,
)

CUDA = b"import torch\nn = torch.cuda.device_count()\n"
MIGRATED = b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    torch.npu = torch.cuda\n\nn = torch.npu.device_count()\n"
HANG = b"import torch\nn = torch.cuda.device_count()  # hang-the-parser\n"
CRASH = b"import torch\nn = torch.cuda.device_count()  # crash-the-parser\n"
TIMEOUT = 120  # a hang detector on a loaded machine, not a speed goal


def tree(root, count: int = 6, special: dict[int, bytes] | None = None):
    root.mkdir()
    for i in range(count):
        (root / f"m{i}.py").write_bytes((special or {}).get(i, CUDA))
    return root


def finish(process: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(process)
        pytest.fail("npu-migrate hung after the signal")
    return process.returncode, err.decode()


def temp_files(root) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".npu-migrate-"))


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("to", ["parent", "group", "group-twice"])
def test_ctrl_c_while_migrating_exits_130_and_writes_nothing(tmp_path, jobs, to):
    src = tree(tmp_path / "src", special={3: HANG})
    env = faulty_env(tmp_path)
    process = start(["--write", "--no-cache", "-j", jobs, "src"], tmp_path, env)
    try:
        worker = wait_for(tmp_path / "state" / "parsing", process)
        if to == "parent":  # `kill -INT <pid>`: the workers get nothing, the parent must end them
            process.send_signal(signal.SIGINT)
        else:  # Ctrl-C in a terminal: the whole foreground process group
            os.killpg(process.pid, signal.SIGINT)
            if to == "group-twice":
                os.killpg(process.pid, signal.SIGINT)
        code, err = finish(process)
    finally:
        kill_group(process)
    assert code == 130, err
    assert "Traceback" not in err and "internal error" not in err
    assert err.strip().splitlines()[-1] == "interrupted: 0 file(s) written before the interrupt, none after it"
    assert all(p.read_bytes() in (CUDA, HANG) for p in src.iterdir())
    assert wait_gone(worker), "a worker outlived the run"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_while_writing_reports_what_was_written_and_writes_no_more(tmp_path, jobs):
    src = tree(tmp_path / "src", count=5)
    env = faulty_env(tmp_path, NPU_TEST_SLOW_WRITE="3")  # the third write stops half way
    process = start(["--write", "--no-cache", "-j", jobs, "src"], tmp_path, env)
    try:
        wait_for(tmp_path / "state" / "writing", process)
        assert len(temp_files(src)) == 1  # the half-written temp file
        os.killpg(process.pid, signal.SIGINT)
        code, err = finish(process)
    finally:
        kill_group(process)
    assert code == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted: 2 file(s) written before the interrupt, none after it"
    contents = sorted(p.read_bytes() for p in src.iterdir())
    assert contents == sorted([CUDA] * 3 + [MIGRATED] * 2)  # whole files only, none after the interrupt
    assert temp_files(src) == []


def test_sigkill_while_writing_leaves_whole_files_and_the_next_run_cleans_up(tmp_path):
    src = tree(tmp_path / "src", count=5)
    env = faulty_env(tmp_path, NPU_TEST_SLOW_WRITE="3")
    process = start(["--write", "--no-cache", "-j", "2", "src"], tmp_path, env)
    try:
        wait_for(tmp_path / "state" / "writing", process)
        os.killpg(process.pid, signal.SIGKILL)
        finish(process)
    finally:
        kill_group(process)
    assert sorted(p.read_bytes() for p in src.iterdir() if p.suffix == ".py") == sorted([CUDA] * 3 + [MIGRATED] * 2)
    leftovers = temp_files(src)
    assert len(leftovers) == 1  # SIGKILL cannot be cleaned up after...

    again = subprocess.run([str(CONSOLE_SCRIPT), "--write", "--no-cache", "src"], cwd=tmp_path,
                           capture_output=True, timeout=TIMEOUT, check=False)
    assert again.returncode == 0, again.stderr
    assert temp_files(src) == []  # ...but the next run removes what it left
    assert sorted(p.read_bytes() for p in src.iterdir()) == [MIGRATED] * 5


def test_sigkill_of_the_parent_ends_its_workers(tmp_path):
    tree(tmp_path / "src", special={2: HANG})
    process = start(["--no-cache", "-j", "2", "src"], tmp_path, faulty_env(tmp_path))
    try:
        worker = wait_for(tmp_path / "state" / "parsing", process)
        process.kill()  # the parent only: its workers are orphaned
        finish(process)
        assert wait_gone(worker), "an orphaned worker kept running"
    finally:
        kill_group(process)


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("crashing", [(2, 5), (0, 1, 2, 3, 4, 8)], ids=["two", "most-in-a-row"])
def test_a_native_parser_crash_fails_only_that_file(tmp_path, jobs, crashing):
    src = tree(tmp_path / "src", count=10, special=dict.fromkeys(crashing, CRASH))
    process = start(["--write", "--no-cache", "-j", jobs, "src"], tmp_path, faulty_env(tmp_path))
    code, err = finish(process)
    assert code == 2, err
    assert "Traceback" not in err
    errors = sorted(line for line in err.splitlines() if line.startswith("error:"))
    assert errors == [
        f"error: src/m{i}.py:1: internal error in npu-migrate (a worker process died on this file: SIGSEGV); "
        "please report it"
        for i in crashing
    ]
    assert [(src / f"m{i}.py").read_bytes() for i in range(10)] == [CRASH if i in crashing else MIGRATED for i in range(10)]


def test_a_native_parser_crash_on_standard_input_fails_that_input_only(tmp_path):
    """Editors pipe a buffer through ``npu-migrate -``: the crash is one line, exit 2,
    and the input comes back unchanged on stdout instead of nothing."""
    process = start(["-", "--stdin-filename", "m.py", "--no-cache"], tmp_path, faulty_env(tmp_path))
    try:
        out, err = process.communicate(CRASH, timeout=TIMEOUT)
    finally:
        kill_group(process)
    assert process.returncode == 2, err
    assert out == CRASH
    assert [line for line in err.decode().splitlines() if line.startswith("error:")] == [
        "error: m.py:1: internal error in npu-migrate (a worker process died on this file: SIGSEGV); please report it"
    ]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_while_writing_is_ctrl_c(tmp_path, signum):
    """issue 38.6: the same one line, exit 128+N, the half-written temp file removed."""
    src = tree(tmp_path / "src", count=5)
    env = faulty_env(tmp_path, NPU_TEST_SLOW_WRITE="3")
    process = start(["--write", "--no-cache", "-j", "2", "src"], tmp_path, env)
    try:
        wait_for(tmp_path / "state" / "writing", process)
        assert len(temp_files(src)) == 1
        os.killpg(process.pid, signum)  # a closed terminal, or `kill -TERM -PGID`, reaches the workers too
        code, err = finish(process)
    finally:
        kill_group(process)
    assert code == 128 + signum, err
    assert "Traceback" not in err
    name = signal.Signals(signum).name
    assert err.strip().splitlines()[-1] == f"terminated ({name}): 2 file(s) written before the interrupt, none after it"
    assert sorted(p.read_bytes() for p in src.iterdir()) == sorted([CUDA] * 3 + [MIGRATED] * 2)
    assert temp_files(src) == []


@pytest.mark.timeout(300)
def test_a_signal_at_a_random_moment_of_write_jobs_2_leaves_no_temp_file(tmp_path):
    """issue 38.6: SIGTERM/SIGHUP/SIGINT to the parent or the group at random moments of a
    real `--write --jobs 2` run (bounded: 8 runs); every file whole, no temp file."""
    import random
    import time

    rng = random.Random(38)
    for trial in range(8):
        root = tmp_path / f"t{trial}"
        root.mkdir()
        src = tree(root / "src", count=40)
        signum = rng.choice([signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
        process = subprocess.Popen([str(CONSOLE_SCRIPT), "--write", "--no-cache", "-j", "2", "src"], cwd=root,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            time.sleep(rng.uniform(0.3, 3.0))
            if rng.random() < 0.5:
                process.send_signal(signum)
            else:
                os.killpg(process.pid, signum)
            code, err = finish(process)
        finally:
            kill_group(process)
        assert "Traceback" not in err, err
        # 128 + N: the run caught the signal and exited; -N: it arrived during interpreter
        # teardown, after the run had finished, and the default action ended the process
        assert code in (0, 128 + signum, -signum), (signum, code, err)
        assert temp_files(src) == [], (trial, signum, code)
        assert all(p.read_bytes() in (CUDA, MIGRATED) for p in src.iterdir())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_probing_the_report_directory_leaves_no_temp_file(tmp_path, monkeypatch, signum):
    """The --output-file/--report check creates and removes a probe file beside the report;
    a SIGTERM or SIGHUP that arrives between the two (sent here from inside mkstemp) is
    taken after the probe is gone, as the run's handler takes it (Terminated)."""
    import tempfile

    from npu_migrate.pipeline import writer
    from npu_migrate.reporting import sink

    real_mkstemp = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made = real_mkstemp(*args, **kwargs)
        signal.raise_signal(signum)  # the terminal closes, or `kill -TERM`, right now
        return made

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_signal)
    previous = signal.signal(signum, writer.raise_terminated)
    try:
        with pytest.raises(writer.Terminated):
            sink.check(str(tmp_path / "report.json"), "--output-file")
    finally:
        signal.signal(signum, previous)
    assert list(tmp_path.iterdir()) == []
