"""Issue 30 (3): ``--write`` never writes through a symbolic link that leaves the
project, and never splits a hard link (reported and skipped: one line, exit 2)."""

from __future__ import annotations

import os

CUDA = b"import torch\nn = torch.cuda.device_count()\n"


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_a_named_symlink_out_of_the_project_is_not_written(tmp_path, run_cli):
    home = tmp_path / "home"
    home.mkdir()
    victim = home / "tool.py"
    victim.write_bytes(CUDA)
    project = tmp_path / "repo"
    (project / "launch").mkdir(parents=True)
    (project / "pyproject.toml").write_bytes(b"[tool.npu-migrate]\n")
    (project / "launch" / "tool.py").symlink_to(os.path.relpath(victim, project / "launch"))
    (project / "good.py").write_bytes(CUDA)
    # pre-commit names staged files, links included
    result = run_cli("--write", "launch/tool.py", "good.py", cwd=project)
    assert result.exit_code == 2, result.output
    [error] = _errors(result.output)
    assert "launch/tool.py: symbolic link to" in error and "outside the project" in error and "skipped" in error
    assert "Traceback" not in result.output
    assert victim.read_bytes() == CUDA
    assert (project / "launch" / "tool.py").is_symlink()
    assert b"torch.npu" in (project / "good.py").read_bytes()  # the others are still written


def test_a_path_named_through_a_linked_directory_out_of_the_project_is_not_written(tmp_path, run_cli):
    """``pkg -> ../elsewhere`` in a repository: ``npu-migrate pkg/m.py --write`` (or
    ``pkg``) once wrote the file outside, because a named path's real directory
    counted as a root of the project."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "m.py").write_bytes(CUDA)
    project = tmp_path / "repo"
    project.mkdir()
    (project / "pyproject.toml").write_bytes(b"[tool.npu-migrate]\n")
    (project / "pkg").symlink_to("../elsewhere")
    for named in ("pkg/m.py", "pkg"):
        result = run_cli("--write", named, cwd=project)
        assert result.exit_code == 2, result.output
        [error] = _errors(result.output)
        assert "outside the project" in error and "skipped" in error, error
        assert (elsewhere / "m.py").read_bytes() == CUDA


def test_a_file_named_outside_the_project_without_links_is_written(tmp_path, run_cli):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "m.py").write_bytes(CUDA)
    project = tmp_path / "repo"
    project.mkdir()
    (project / "pyproject.toml").write_bytes(b"[tool.npu-migrate]\n")
    result = run_cli("--write", str(tmp_path / "other" / "m.py"), cwd=project)
    assert result.exit_code == 0, result.output
    assert b"torch.npu" in (tmp_path / "other" / "m.py").read_bytes()


def test_a_symlink_inside_the_project_is_written_through(tmp_path, run_cli):
    (tmp_path / "real.py").write_bytes(CUDA)
    (tmp_path / "alias.py").symlink_to("real.py")
    result = run_cli("--write", "alias.py")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "alias.py").is_symlink() and b"torch.npu" in (tmp_path / "real.py").read_bytes()


def test_a_hard_link_is_reported_and_not_split(tmp_path, run_cli):
    (tmp_path / "a.py").write_bytes(CUDA)
    os.link(tmp_path / "a.py", tmp_path / "b.py")
    (tmp_path / "c.py").write_bytes(CUDA)
    result = run_cli("--write", ".")
    assert result.exit_code == 2, result.output
    errors = _errors(result.output)
    assert len(errors) == 1 and "has 2 hard links; not written (skipped)" in errors[0]
    assert os.path.samefile(tmp_path / "a.py", tmp_path / "b.py")  # not split
    assert (tmp_path / "a.py").read_bytes() == CUDA
    assert b"torch.npu" in (tmp_path / "c.py").read_bytes()


def test_a_link_swapped_to_the_outside_during_the_run_is_refused(tmp_path, monkeypatch):
    """The check is made on the path the writer is about to replace, not on an earlier look."""
    import pytest

    from npu_migrate.pipeline import writer

    outside = tmp_path / "outside.py"
    outside.write_bytes(b"x\n")
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").symlink_to(outside)
    with pytest.raises(writer.Refused, match="outside the project"):
        writer.write_atomic(str(project / "a.py"), b"y\n", roots=[str(project)])
    assert outside.read_bytes() == b"x\n" and not [p for p in project.iterdir() if writer.is_temp_name(p.name)]
