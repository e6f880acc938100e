"""The heartbeat directory an installed parent makes for its workers (heartbeat.py) is
private and goes away when the parent exits: a job leaves nothing in the temporary
directory, and a forked child's exit does not take the parent's directory with it."""

import os
import stat
import textwrap

import pytest

from ._helpers import child_env, run_script

JOB = textwrap.dedent(r"""
    import os, sys
    from npu_runtime import heartbeat

    heartbeat.create_for_children()
    path = os.environ[heartbeat.ENV_DIR].partition(":")[2]
    print(path, oct(os.stat(path).st_mode & 0o777))
    pid = os.fork()
    if pid == 0:
        os._exit(0) if sys.argv[1] == "exit" else sys.exit(0)   # sys.exit runs atexit hooks
    os.waitpid(pid, 0)
    print("after child", os.path.isdir(path))
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["exit", "sys.exit"])
def test_the_parent_removes_its_heartbeat_directory_and_a_child_does_not(tmp_path, how):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    proc = run_script(work, JOB, how, env=child_env(TMPDIR=str(tmp)))
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()
    path, mode = first.split()
    assert os.path.dirname(path) == str(tmp)
    assert mode == oct(stat.S_IRWXU)
    assert second == "after child True"        # the forked child left the parent's directory alone
    assert not os.path.exists(path)            # and the parent removed it at exit
    assert os.listdir(tmp) == []


HARD_EXIT = textwrap.dedent(r"""
    import os, sys
    import npu_runtime
    from npu_runtime import heartbeat

    npu_runtime.install(watchdog=False)
    print(os.environ[heartbeat.ENV_DIR].partition(":")[2], flush=True)
    from npu_runtime import health
    health._exit_rank(3)        # the health monitor's exit class, as os._exit
""")


@pytest.mark.timeout(120)
def test_an_exit_past_atexit_still_removes_the_directory(tmp_path):
    """The health monitor's, the watchdog's and a hung teardown's exits are ``os._exit``,
    which skips atexit: each fresh-clone CI run had left some 50 heartbeat directories in
    the temporary directory. They remove the directory first."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    proc = run_script(work, HARD_EXIT, "health", env=child_env(TMPDIR=str(tmp)))
    assert proc.returncode == 3, proc.stderr
    path = proc.stdout.split()[0]
    assert os.path.dirname(path) == str(tmp)
    assert not os.path.exists(path)
    assert os.listdir(tmp) == []


KILLED = textwrap.dedent(r"""
    import os, signal
    from npu_runtime import heartbeat

    heartbeat.create_for_children()
    print(os.environ[heartbeat.ENV_DIR].partition(":")[2], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)   # runs no exit code at all
""")


@pytest.mark.timeout(120)
def test_the_next_parent_sweeps_the_directory_of_one_that_was_killed(tmp_path):
    """SIGKILL runs nothing: its directory stays until the next installed parent, which
    removes those of makers that are gone, and nothing else (a live maker's directory, a
    directory of another shape or of another pid namespace, a link)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    killed = run_script(work, KILLED, env=child_env(TMPDIR=str(tmp)))
    assert killed.returncode == -9
    left = killed.stdout.split()[0]
    assert os.path.isdir(left)
    namespace = os.stat("/proc/self/ns/pid").st_ino
    assert os.path.basename(left).startswith(f"npu_runtime-heartbeat-{namespace}.")
    keep = [
        f"npu_runtime-heartbeat-{namespace}.{os.getpid()}-live",   # this test's process is alive
        "npu_runtime-heartbeat-keep",                              # made before the pid was in the name
        f"npu_runtime-heartbeat-{namespace + 1}.999999999-other",  # another pid namespace: its pids are not ours
    ]
    for name in keep:
        (tmp / name).mkdir()
    target = tmp_path / "target"
    target.mkdir()
    link = f"npu_runtime-heartbeat-{namespace}.999999999-link"
    (tmp / link).symlink_to(target)
    proc = run_script(work, JOB, "exit", env=child_env(TMPDIR=str(tmp)))
    assert proc.returncode == 0, proc.stderr
    assert not os.path.exists(left)
    assert sorted(os.listdir(tmp)) == sorted([*keep, link])
    assert target.is_dir()
