"""The verify command line, without starting a twin."""

from __future__ import annotations

from npu_migrate.verify.command import Request, run


def test_help_lists_the_options(run_cli):
    result = run_cli("verify", "--help")
    assert result.exit_code == 0
    for option in ("--nproc", "--steps", "--report", "--ignore", "--select", "--resume-arg", "--no-resume"):
        assert option in result.output


def test_script_outside_the_project_is_an_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "project").mkdir()
    (tmp_path / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    assert run(Request(script="train.py", project="project")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outside the project directory" in err


def test_missing_script_is_a_usage_error(run_cli):
    result = run_cli("verify", "nope.py")
    assert result.exit_code == 2


def test_unknown_rule_code_is_an_error_and_writes_nothing(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    monkeypatch.chdir(tmp_path)
    assert run(Request(script="train.py", ignore=["NPU999"], quiet=True)) == 2
    assert "NPU999" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
