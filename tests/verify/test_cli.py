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


def test_missing_script_says_so(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("verify", "nope.py")
    assert result.exit_code == 2 and "'nope.py' does not exist" in result.output


def test_accelerate_launch_says_what_to_run_instead(run_cli, tmp_path, monkeypatch):
    # `accelerate launch` itself is not run: verify starts python or torchrun, and the
    # launcher's options are not verify's (--multi_gpu is no verify option: no usage error)
    (tmp_path / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    result = run_cli("verify", "--steps", "3", "accelerate", "launch", "--multi_gpu", "--num_processes", "2",
                     "--mixed_precision", "fp16", "train.py", "--lr", "1")
    assert result.exit_code == 2
    assert "not through `accelerate launch`" in result.output
    assert "  ACCELERATE_MIXED_PRECISION=fp16 npu-migrate verify --steps 3 --nproc 2 train.py -- --lr 1\n" in (
        result.output)
    assert not (tmp_path / "reference").exists()


def test_torchrun_and_python_in_front_of_the_script_say_what_to_run_instead(run_cli, tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    result = run_cli("verify", "--", "torchrun", "--nproc-per-node=2", "train.py", "--epochs", "1")
    assert result.exit_code == 2 and "  npu-migrate verify --nproc 2 train.py -- --epochs 1\n" in result.output
    result = run_cli("verify", "python", "train.py")
    assert result.exit_code == 2 and "  npu-migrate verify train.py\n" in result.output
    # a launcher's name after the script is an argument of the script, not a launcher
    from npu_migrate.verify.cli import launcher_advice

    assert launcher_advice("train.py", ["torchrun"]) is None


def test_the_fork_server_is_on_unless_switched_off(monkeypatch, run_cli):
    from npu_migrate.verify.command import fork_server_wanted

    monkeypatch.delenv("NPU_MIGRATE_FORK_SERVER", raising=False)
    assert fork_server_wanted(Request(script="train.py"))
    assert not fork_server_wanted(Request(script="train.py", fork_server=False))
    monkeypatch.setenv("NPU_MIGRATE_FORK_SERVER", "0")
    assert not fork_server_wanted(Request(script="train.py"))
    assert fork_server_wanted(Request(script="train.py", fork_server=True))
    monkeypatch.setenv("NPU_MIGRATE_FORK_SERVER", " Off")
    assert not fork_server_wanted(Request(script="train.py"))
    monkeypatch.setenv("NPU_MIGRATE_FORK_SERVER", "1")
    assert fork_server_wanted(Request(script="train.py"))
    assert "--no-fork-server" in run_cli("verify", "--help").output
