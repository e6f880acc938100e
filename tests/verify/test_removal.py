"""verify's scratch directory is removed whatever a twin left in it (issue 38 item 1,
"the scratch directory is always removed unless --keep"). Round 4 follow-up: a twin that
made a directory tree 1,500 levels deep in its copy ended verify with a RecursionError
traceback out of ``shutil.rmtree`` and left the scratch directory behind; a twin that
made a directory of its copy unreadable (``chmod 000``) left it for any user but root."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from npu_migrate._runtime import own_dirs

from npu_migrate.verify import command, removal, scratch


def _deep(top: Path, levels: int, name: str = "a") -> None:
    """``top/name/name/...`` ``levels`` deep, a file at every level (descriptors, never
    long paths: a path this deep is longer than PATH_MAX)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.mark.timeout(120)
def test_a_tree_deeper_than_the_recursion_limit_and_longer_than_path_max_is_removed(tmp_path):
    work = tmp_path / "work"
    (work / "deep").mkdir(parents=True)
    (work / "long").mkdir()
    _deep(work / "deep", 1500)
    _deep(work / "long", 40, "n" * 250)  # 10,000 characters of path
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_text("keep")
    os.chmod(outside / "sub", 0o500)
    (work / "deep" / "a" / "out").symlink_to(outside)  # a link is removed, never followed
    try:
        assert removal.remove_tree(work) is True
        assert not os.path.lexists(work)
        assert (outside / "sub" / "keep.txt").read_text() == "keep"
        assert stat.S_IMODE(os.stat(outside / "sub").st_mode) == 0o500
    finally:  # never leave pytest's own cleanup (shutil.rmtree) a tree it cannot remove
        removal.remove_tree(work)


def _unremovable(base: Path) -> None:
    """A tree a twin made hard to remove: unreadable, read-only and unsearchable
    directories, and directories with the names the second pass gives moved ones."""
    work = base / "work"
    (work / "x" / "y" / "z").mkdir(parents=True)
    (work / "x" / "y" / "z" / "f").write_text("f")
    (work / "x" / "g").write_text("g")
    (work / ".npu-migrate-removing-0" / "q").mkdir(parents=True)
    (work / ".npu-migrate-removing-1").mkdir()
    os.chmod(work / "x" / "y" / "z", 0)
    os.chmod(work / "x" / "y", 0o100)
    os.chmod(work / "x", 0o500)
    os.chmod(work, 0o500)


@pytest.mark.timeout(60)
def test_directories_the_twin_made_unreadable_or_read_only_are_removed(tmp_path):
    """As a user without root's override of permissions: root checks it in a forked
    child that has become nobody (exit 0: removed, 1: left, 2: an exception)."""
    if os.geteuid() != 0:
        _unremovable(tmp_path)
        assert removal.remove_tree(tmp_path / "work") is True
        assert not os.path.lexists(tmp_path / "work")
        return
    base = Path(tempfile.mkdtemp(prefix="npu-migrate-test-removal-"))  # tmp_path's parents are root's only
    try:
        os.chown(base, 65534, 65534)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 2
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                _unremovable(base)
                code = 0 if removal.remove_tree(base / "work") and not os.path.lexists(base / "work") else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        removal.remove_tree(base)


@pytest.mark.timeout(120)
def test_verify_removes_a_scratch_directory_a_twin_made_too_deep_for_rmtree(tmp_path, monkeypatch, capsys):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("pass\n")
    (tmp_path / "tmp").mkdir()
    monkeypatch.chdir(proj)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))

    def deep_twin(req, root, script, cwd_in_root, work):
        (work / "reference").mkdir()
        _deep(work / "reference", 1500)  # what the twin's own os.makedirs loop left
        return 0

    monkeypatch.setattr(command, "_verify", deep_twin)
    try:
        assert command.run(command.Request(script="train.py")) == 0
        err = capsys.readouterr().err
        assert "Traceback" not in err and "RecursionError" not in err
        assert list((tmp_path / "tmp").iterdir()) == []
    finally:
        removal.remove_tree(tmp_path / "tmp")


@pytest.mark.timeout(120)
def test_a_project_nested_too_deep_to_copy_is_one_line(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("pass\n")
    _deep(proj, 1500)
    try:
        with pytest.raises(scratch.ScratchError) as info:
            scratch.copy_project(proj, tmp_path / "copy")
        assert "\n" not in str(info.value) and "nest too deep" in str(info.value)
    finally:
        removal.remove_tree(proj)
        removal.remove_tree(tmp_path / "copy")



@pytest.mark.timeout(60)
def test_the_scratch_directory_of_a_killed_verify_is_swept_by_the_next(tmp_path, monkeypatch):
    """SIGKILL runs no code: the scratch directory (two copies of the project) stayed.
    The next verify removes it; a live verify's, a --keep one and another pid
    namespace's stay."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = "import time; from npu_migrate.verify import removal; print(removal.make_scratch(), flush=True); time.sleep(300)"
    child = subprocess.Popen([sys.executable, "-c", code],
                             env=dict(os.environ, TMPDIR=str(tmp_path)), stdout=subprocess.PIPE, text=True)
    try:
        killed = Path(child.stdout.readline().strip())
        (killed / "reference").mkdir()
        _deep(killed / "reference", 50)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert killed.is_dir() and killed.name.startswith(f"{removal.PREFIX}{own_dirs.pid_namespace()}.{child.pid}-")
    other_ns = tmp_path / f"{removal.PREFIX}1.{child.pid}-x"
    other_ns.mkdir()
    kept = removal.make_scratch(keep=True)  # the next verify
    assert not os.path.lexists(killed)
    live = removal.make_scratch()  # this process's: alive
    removal.make_scratch()
    assert kept.is_dir() and live.is_dir() and other_ns.is_dir()
