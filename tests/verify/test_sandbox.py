"""verify's scratch copies are a sandbox, and every process a twin starts ends with it
(issue 38 item 1). No torch: the twin is a tiny script run through the real supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from npu_migrate.verify import scratch, supervise, twins

# -- the copies ------------------------------------------------------------------------


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "store").mkdir(parents=True)
    (proj / "train.py").write_text("print('hi')\n")
    (proj / "store" / "old.pt").write_bytes(b"old")
    return proj


def test_an_absolute_link_inside_the_project_stays_inside_the_copy(tmp_path):
    proj = _project(tmp_path)
    (proj / "ckpt").symlink_to(proj / "store")  # ckpt -> /abs/proj/store
    (proj / "rel").symlink_to("store/old.pt")
    copy = scratch.copy_project(proj, tmp_path / "copy")
    (copy / "ckpt" / "model.pt").write_bytes(b"new")  # what the twin's torch.save does
    assert not (proj / "store" / "model.pt").exists()
    assert (copy / "store" / "model.pt").read_bytes() == b"new"
    assert os.readlink(copy / "ckpt") == "store"
    assert (copy / "rel").read_bytes() == b"old"
    assert scratch.escapes(copy) == []


def test_a_link_that_leaves_the_project_is_copied_as_its_target(tmp_path):
    proj = _project(tmp_path)
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "data.bin").write_bytes(b"data")
    (outside / "back").symlink_to(proj / "store")  # a link from there back into the project
    (outside / "loop").symlink_to(outside)
    (proj / "data").symlink_to(outside)
    (proj / "file.txt").symlink_to(outside / "sub" / "data.bin")
    notes: list[str] = []
    copy = scratch.copy_project(proj, tmp_path / "copy", notes=notes)
    assert not (copy / "data").is_symlink() and (copy / "data" / "sub" / "data.bin").read_bytes() == b"data"
    assert not (copy / "file.txt").is_symlink() and (copy / "file.txt").read_bytes() == b"data"
    (copy / "data" / "back" / "x").write_bytes(b"x")
    (copy / "data" / "sub" / "y").write_bytes(b"y")
    assert not (proj / "store" / "x").exists() and not (outside / "sub" / "y").exists()
    assert scratch.escapes(copy) == []
    assert any("loop" in note for note in notes)


def test_dangling_outside_links_and_special_files_are_left_out_with_a_note(tmp_path):
    proj = _project(tmp_path)
    os.mkfifo(proj / "pipe")
    (proj / "gone").symlink_to(tmp_path / "nowhere" / "x")
    (proj / "to-pipe").symlink_to(proj / "pipe")
    (proj / "null").symlink_to("/dev/null")
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(proj / "sock"))
    try:
        notes: list[str] = []
        copy = scratch.copy_project(proj, tmp_path / "copy", notes=notes)
    finally:
        sock.close()
    names = sorted(p.name for p in copy.iterdir())
    assert names == ["store", "to-pipe", "train.py"]  # to-pipe: a link to the copy's (absent) pipe
    text = "\n".join(notes)
    assert "pipe: a FIFO" in text and "sock: a socket" in text and "gone:" in text and "null:" in text
    assert not os.path.exists(tmp_path / "nowhere")
    assert scratch.escapes(copy) == []


def test_too_much_behind_outside_links_is_refused_with_one_line(tmp_path, monkeypatch):
    proj = _project(tmp_path)
    (tmp_path / "big").write_bytes(b"x" * 4096)
    (proj / "big").symlink_to(tmp_path / "big")
    monkeypatch.setattr(scratch, "EXTERNAL_LIMIT", 1024)
    with pytest.raises(scratch.ScratchError) as info:
        scratch.copy_project(proj, tmp_path / "copy")
    assert "\n" not in str(info.value) and "--project" in str(info.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", ["/proc/kmsg", "/proc/self", "/proc/self/mem", "/sys/kernel", "/dev/shm", "/proc"])
def test_links_into_kernel_pseudo_file_systems_are_left_out(tmp_path, target):
    """Round 5: ``k -> /proc/kmsg`` hung verify's copy (a read that blocks for ever, and
    consumes the kernel's log); ``p -> /proc/self`` ended it with EINVAL."""
    if not os.path.exists(target):
        pytest.skip(f"no {target} here")
    proj = _project(tmp_path)
    (proj / "k").symlink_to(target)
    notes: list[str] = []
    start = time.monotonic()
    copy = scratch.copy_project(proj, tmp_path / "copy", notes=notes)
    assert time.monotonic() - start < 30
    pseudo = os.stat(target).st_dev in scratch._pseudo_devices()
    if pseudo:
        assert not os.path.lexists(copy / "k")
        assert any(n.startswith("k: ") and "pseudo file system" in n for n in notes), notes
    assert scratch.escapes(copy) == []


@pytest.mark.timeout(60)
def test_a_link_below_an_outside_directory_into_proc_is_left_out(tmp_path):
    proj = _project(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.bin").write_bytes(b"x")
    (outside / "p").symlink_to("/proc/self")
    (proj / "data").symlink_to(outside)
    notes: list[str] = []
    copy = scratch.copy_project(proj, tmp_path / "copy", notes=notes)
    assert (copy / "data" / "data.bin").read_bytes() == b"x"
    assert not os.path.lexists(copy / "data" / "p")
    assert any("pseudo file system" in n for n in notes), notes


@pytest.mark.timeout(60)
def test_an_outside_file_is_counted_by_the_bytes_read_not_its_size(tmp_path, monkeypatch):
    """A file that reports fewer bytes than it yields (a pseudo file reports 0) is
    counted as it is read."""
    monkeypatch.setattr(scratch, "EXTERNAL_LIMIT", 1000)
    monkeypatch.setattr(scratch, "_pseudo_devices", lambda: frozenset())
    proj = _project(tmp_path)
    (proj / "cpu").symlink_to("/proc/self/maps")  # reports size 0, yields more than 1000 bytes
    with pytest.raises(scratch.ScratchError, match="more than"):
        scratch.copy_project(proj, tmp_path / "copy")


def test_a_fifo_in_the_project_is_no_traceback_for_verify(tmp_path, monkeypatch, capsys):
    """The command gets as far as the migration with a FIFO and a socket in the tree."""
    from npu_migrate.verify import command

    proj = _project(tmp_path)
    os.mkfifo(proj / "pipe")
    monkeypatch.chdir(proj)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    seen = {}

    def stop(*args, **kwargs):
        seen["copied"] = sorted(p.name for p in (tmp_path / "tmp").glob("*/reference/*"))
        raise twins.MigrationError("stopped here by the test")

    monkeypatch.setattr(twins, "migrate_copy", stop)
    assert command.run(command.Request(script="train.py")) == 2
    err = capsys.readouterr().err
    assert "note: pipe: a FIFO" in err and "Traceback" not in err
    assert seen["copied"] == ["store", "train.py"]
    assert list((tmp_path / "tmp").iterdir()) == []  # the scratch directory is gone


# -- the processes ---------------------------------------------------------------------

#: A twin that leaves everything behind: a child it does not wait for, a setsid child,
#: a double-forked daemon with a cleared environment, then either exits or hangs.
LEAVER = textwrap.dedent("""
    import os, subprocess, sys, time
    pids = open(sys.argv[1], "a")
    sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
    pids.write(f"{subprocess.Popen(sleep).pid}\\n")
    pids.write(f"{subprocess.Popen(sleep, start_new_session=True).pid}\\n")
    pids.write(f"{subprocess.Popen(['setsid', '-f', *sleep]).pid}\\n")
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve(sys.executable, sleep, {})  # no marker in its environment
        os._exit(0)
    pids.write(f"{os.getpid()}\\n")
    pids.flush()
    time.sleep(1.0)
    if sys.argv[2] == "hang":
        time.sleep(300)
""")


def _live(pid: int) -> bool:
    return supervise._live(pid)


def _sleepers_after(start: float) -> list[int]:
    """Live `time.sleep(300)` processes of this user started by the test (by command line)."""
    out = []
    for pid in supervise._pids():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"time.sleep(300)" in cmd and _live(pid) and os.stat(f"/proc/{pid}").st_uid == os.getuid():
            out.append(pid)
    return out


def _run_leaver(tmp_path, monkeypatch, mode: str, timeout: float):
    script = tmp_path / "leaver.py"
    script.write_text(LEAVER)
    monkeypatch.setattr(twins, "command_line",
                        lambda s, a, n, t=False, sp=False: [sys.executable, s, *a])
    env = dict(os.environ, **{twins.hook.ENV_OUT: str(tmp_path / "out")})
    pids = tmp_path / "pids"
    result = twins.run("twin", tmp_path, str(script), [str(pids), mode], 1, env, timeout)
    return result, [int(x) for x in pids.read_text().split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and prctl")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode,timeout", [("exit", 60.0), ("hang", 4.0)])
def test_nothing_a_twin_starts_outlives_its_run(tmp_path, monkeypatch, mode, timeout):
    before = set(_sleepers_after(0))
    result, pids = _run_leaver(tmp_path, monkeypatch, mode, timeout)
    assert result.timed_out == (mode == "hang")
    assert not [pid for pid in pids if _live(pid)]
    time.sleep(0.2)
    assert set(_sleepers_after(0)) - before == set()  # the daemons (their pids unknown) too


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and prctl")
@pytest.mark.timeout(60)
def test_a_killed_supervisor_is_swept_by_the_marker(tmp_path):
    token = "t" + os.urandom(8).hex()
    env = dict(os.environ, **{supervise.MARKER: token})
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time;"
                              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                              " start_new_session=True); time.sleep(300)"], env=env, start_new_session=True)
    deadline = time.monotonic() + 20
    while len(supervise.marked(token)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    marked = supervise.marked(token)
    assert len(marked) == 2
    os.killpg(child.pid, signal.SIGKILL)  # the setsid grandchild is in another group
    child.wait()
    assert supervise.marked(token) != []
    supervise.sweep(token)
    assert supervise.marked(token) == []


DRIVER = textwrap.dedent("""
    import os, sys, tempfile
    from pathlib import Path
    from npu_migrate.verify import command, twins

    twins.command_line = lambda s, a, n, t=False, sp=False: [sys.executable, s, *a]

    def fake_verify(req, root, script, cwd_in_root, work):
        (work / "copy").mkdir()
        env = dict(os.environ, **{twins.hook.ENV_OUT: str(work / "out")})
        print("running", flush=True)
        twins.run("twin", work / "copy", sys.argv[1], [sys.argv[2], "hang"], 1, env, 120)
        return 0

    command._verify = fake_verify
    os.chdir(sys.argv[3])
    sys.exit(command.run(command.Request(script="train.py")))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and prctl")
@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_verify_ends_its_twins_and_removes_the_scratch(tmp_path, signum):
    proj = _project(tmp_path)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "leaver.py").write_text(LEAVER)
    (tmp_path / "driver.py").write_text(DRIVER)
    pids = tmp_path / "pids"
    before = set(_sleepers_after(0))
    proc = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "leaver.py"), str(pids),
                             str(proj)], env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"running\n"
    deadline = time.monotonic() + 30
    while (not pids.exists() or len(pids.read_text().split()) < 4) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)  # the double fork has happened
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if signum == signal.SIGINT else 128 + signum), err
    assert b"Traceback" not in err
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not [pid for pid in map(int, pids.read_text().split()) if _live(pid)]
    time.sleep(0.2)
    assert set(_sleepers_after(0)) - before == set()


@pytest.mark.timeout(60)
def test_a_link_to_the_projects_parent_does_not_copy_the_scratch_directory_into_itself(tmp_path):
    """Round 4, held-out pass: with the scratch directory beside the project, ``up -> ..``
    copied the copy into itself until the name was too long (an OSError traceback)."""
    from npu_migrate.verify import scratch

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("pass\n")
    os.symlink("..", proj / "up")
    work = tmp_path / "npu-migrate-verify-x"
    work.mkdir()
    notes: list[str] = []
    copy = scratch.copy_project(proj, work / "reference", None, notes)
    assert (copy / "up" / "proj" / "train.py").exists()
    assert not (copy / "up" / "npu-migrate-verify-x" / "reference").exists()
    assert any("scratch copy being made" in n for n in notes)
    assert scratch.escapes(copy) == []


@pytest.mark.timeout(60)
def test_a_run_whose_supervisor_was_killed_leaves_no_orphan_even_without_the_marker(tmp_path):
    """Round 4, held-out pass: a script that started an env-cleared ``setsid`` child and
    then SIGKILLed its supervisor (``os.kill(os.getppid(), 9)``) left that child running;
    verify is a child subreaper too and ends what is re-parented to it."""
    pidfile = tmp_path / "pid"
    code = textwrap.dedent(f"""
        import os, subprocess, sys, time
        from npu_migrate.verify import supervise, twins
        supervise._prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)
        # the "supervisor": starts an env-less session leader, then dies without ending it
        sup = subprocess.Popen([sys.executable, "-c",
            "import subprocess, sys; p = subprocess.Popen(['sleep', '120'], env={{}}, start_new_session=True, stdout=-3, stderr=-3); "
            "open({str(pidfile)!r}, 'w').write(str(p.pid))"])
        sup.wait()
        time.sleep(0.3)
        killed = twins._end_orphans()
        print(sorted(killed))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stderr
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    alive = supervise._live(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive and str(pid) in done.stdout


@pytest.mark.timeout(60)
def test_an_outside_directory_of_many_empty_files_is_refused_with_one_line(tmp_path, monkeypatch):
    """Bytes alone did not bound the copy: an outside directory of a million empty files
    took about a minute per copy (100,000: 5 s). Each entry counts ENTRY_COST bytes."""
    monkeypatch.setattr(scratch, "EXTERNAL_LIMIT", 1000 * scratch.ENTRY_COST)
    proj = _project(tmp_path)
    many = tmp_path / "many"
    many.mkdir()
    for i in range(1200):
        (many / str(i)).touch()
    (proj / "data").symlink_to(many)
    with pytest.raises(scratch.ScratchError) as info:
        scratch.copy_project(proj, tmp_path / "copy")
    assert "\n" not in str(info.value) and "data/" in str(info.value) and "--project" in str(info.value)


def test_a_runs_temporary_files_stay_in_the_scratch_directory(tmp_path):
    """Held-out round of issue 38: torch made /tmp/torchinductor_<user> at a twin's first
    optimizer step (torchrun: torchelastic_* directories, pytorch-errorfile-*.pickle of a
    failed rank, never removed) under the user's TMPDIR, which outlived verify."""
    out = tmp_path / "scratch" / "records" / "reference"
    env = twins.base_env(out, steps=2, seed=0)
    for name in ("TMPDIR", "TMP", "TEMP"):
        assert Path(env[name]).is_dir() and Path(env[name]).is_relative_to(out)
    done = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp(prefix='torchelastic_'))"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    assert Path(done.stdout.strip()).is_relative_to(out)


def test_a_report_path_that_is_not_a_regular_file_is_refused_never_replaced(tmp_path):
    """Held-out round of issue 38: as root, --report /dev/full replaced the device node with
    the JSON report (a rename over it), and a FIFO with a regular file."""
    from npu_migrate.verify import report

    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    (tmp_path / "s.txt").mkdir()
    assert report.unwritable(Path("/dev/null"))  # never handed to a write here: on old code it was replaced
    for path in (fifo, tmp_path / "s.json"):
        assert report.unwritable(path), path
        with pytest.raises(OSError):
            report._atomic_write(path.with_suffix(".txt") if path.name == "s.json" else path, b"{}")
    assert stat_is_fifo(fifo) and Path("/dev/null").is_char_device()
    assert report.unwritable(tmp_path / "ok.json") is None
    assert report.unwritable(Path("/proc/version")) is not None  # no file can be made there
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def stat_is_fifo(path: Path) -> bool:
    import stat

    return stat.S_ISFIFO(os.lstat(path).st_mode)
