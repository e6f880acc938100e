"""A file system that changes under the run: files edited or deleted after they
were read, and the temp files of runs that were killed."""

from __future__ import annotations

import fcntl
import os

import pytest

from npu_migrate.pipeline import runner, writer
from npu_migrate.pipeline.files import ReadError, content_digest

CUDA = b"import torch\nn = torch.cuda.device_count()\n"
MIGRATED = b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    torch.npu = torch.cuda\n\nn = torch.npu.device_count()\n"
EDITED = b"import torch\nn = torch.cuda.device_count()  # the user's edit\n"


@pytest.fixture
def project(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_bytes(CUDA)
    return tmp_path


@pytest.fixture
def after_migration(monkeypatch):
    """Run ``change`` once every file is migrated, before anything is shown or written."""

    def install(change):
        real = runner.run

        def run(*args, **kwargs):
            results = real(*args, **kwargs)
            change()
            return results

        monkeypatch.setattr(runner, "run", run)

    return install


def test_a_file_edited_during_write_keeps_the_edit(project, run_cli, after_migration):
    after_migration(lambda: (project / "b.py").write_bytes(EDITED))
    result = run_cli("--write", "--no-cache", ".")
    assert result.exit_code == 2
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == [
        "error: b.py: changed on disk while npu-migrate was running; left as it is now (run npu-migrate again)"
    ]
    assert (project / "b.py").read_bytes() == EDITED
    assert (project / "a.py").read_bytes() == (project / "c.py").read_bytes() == MIGRATED
    assert "3 file(s) scanned, 2 changed" in result.output


def test_a_dry_run_shows_no_diff_against_content_it_did_not_migrate(project, run_cli, after_migration):
    after_migration(lambda: (project / "a.py").write_bytes(EDITED))
    result = run_cli("--no-cache", ".")
    assert result.exit_code == 2
    assert "error: a.py: changed on disk while npu-migrate was running" in result.output
    assert [line for line in result.output.splitlines() if line.startswith("+++")] == ["+++ b/b.py", "+++ b/c.py"]


def test_an_edit_while_the_temp_file_is_written_wins(tmp_path, monkeypatch):
    """The last check is right before os.replace: an edit that lands after the first
    check, while the new bytes are being written out, is still kept."""
    path = tmp_path / "a.py"
    path.write_bytes(CUDA)
    real_fsync = os.fsync

    def fsync(fd):
        path.write_bytes(EDITED)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(ReadError, match="a.py: changed on disk"):
        writer.write_atomic(str(path), MIGRATED, content_digest(CUDA))
    assert path.read_bytes() == EDITED
    assert os.listdir(tmp_path) == ["a.py"]  # no temp file left behind


def test_write_keeps_symlinks_and_writes_through_them(tmp_path):
    real = tmp_path / "real.py"
    real.write_bytes(CUDA)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    writer.write_atomic(str(link), MIGRATED, content_digest(CUDA))
    assert link.is_symlink() and real.read_bytes() == MIGRATED


def test_temp_files_of_killed_runs_are_removed_but_not_those_of_a_running_one(project, run_cli):
    stale = project / ".npu-migrate-killed.tmp"
    stale.write_bytes(CUDA[:10])  # what SIGKILL leaves: nobody holds its lock
    live = project / ".npu-migrate-running.tmp"
    live.write_bytes(CUDA[:10])
    other = project / ".npu-migrate-notes.txt"  # not our name pattern
    other.write_bytes(b"")
    with open(live, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # as a concurrent run's writer holds it
        result = run_cli("--check", "--no-cache", ".")
        assert result.exit_code == 1
        assert not stale.exists()
        assert live.exists() and other.exists()
    result = run_cli("--check", "--no-cache", "-v", ".")
    assert not live.exists()
    assert "removed 1 temp file(s) left by an interrupted run" in result.output


def test_temp_files_beside_a_named_file_are_removed(project, run_cli):
    (project / "sub").mkdir()
    (project / "sub" / "x.py").write_bytes(CUDA)
    stale = project / "sub" / ".npu-migrate-k1ll3d.tmp"
    stale.write_bytes(b"half")
    run_cli("--no-cache", "sub/x.py")
    assert not stale.exists()


def test_a_writer_racing_a_clean_up_never_loses_its_temp_file(tmp_path, monkeypatch):
    """A clean-up that takes a temp file between mkstemp and flock makes the writer
    start over with a new one, instead of swapping in a file that is gone."""
    path = tmp_path / "a.py"
    path.write_bytes(CUDA)
    real_mkstemp, raced = writer.tempfile.mkstemp, []

    def mkstemp(*args, **kwargs):
        fd, name = real_mkstemp(*args, **kwargs)
        if not raced:
            raced.append(name)
            assert writer.remove_leftovers([name]) == 1  # a concurrent run's clean-up got there first
        return fd, name

    monkeypatch.setattr(writer.tempfile, "mkstemp", mkstemp)
    writer.write_atomic(str(path), MIGRATED, content_digest(CUDA))
    assert path.read_bytes() == MIGRATED
    assert os.listdir(tmp_path) == ["a.py"]


def test_without_a_process_pool_files_are_migrated_in_this_process(project, monkeypatch):
    """A platform without sem_open cannot make a pool: the run goes on, unisolated."""
    from npu_migrate.pipeline.settings import Settings

    def no_pool(*args, **kwargs):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(runner, "ProcessPoolExecutor", no_pool)
    results = runner.run([str(project / n) for n in ("a.py", "b.py", "c.py")], Settings(), jobs=2)
    assert [r.new_source for r in results] == [MIGRATED] * 3
    assert all(r.source_digest == content_digest(CUDA) for r in results)
