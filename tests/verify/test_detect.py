"""How verify starts a script: its own processes (torch.multiprocessing.spawn), DataParallel."""

from __future__ import annotations

import pytest

from npu_migrate.verify.command import Request, run
from npu_migrate.verify.detect import data_parallel_only, spawns_processes
from npu_migrate.verify.twins import command_line


@pytest.mark.parametrize(("source", "expected"), [
    ("import torch.multiprocessing as mp\nmp.spawn(f, nprocs=2)\n", True),
    ("from torch.multiprocessing import spawn\ndef main():\n    spawn(f)\n", True),
    ("import torch\ntorch.multiprocessing.start_processes(f, nprocs=2)\n", True),
    ("import multiprocessing as mp\nmp.spawn(f)\n", False),  # not torch's
    ("def spawn(f):\n    pass\nspawn(f)\n", False),
    ("def broken(:\n", False),
])
def test_spawns_processes(tmp_path, source, expected):
    script = tmp_path / "train.py"
    script.write_text(source)
    assert spawns_processes(script) is expected


def test_data_parallel_only(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2))\n")
    assert data_parallel_only(script)
    script.write_text("import torch.nn as nn\nimport torch.distributed as dist\n"
                      "if dist.is_available():\n    dist.init_process_group('nccl')\nm = nn.DataParallel(m)\n")
    assert not data_parallel_only(script)


def test_a_spawning_script_runs_as_one_process():
    assert command_line("train.py", ["--x"], 2, spawns=True)[1:5] == ["-m", "npu_migrate.verify.entry", "train.py", "--x"]
    assert "torch.distributed.run" in command_line("train.py", [], 2)


def test_data_parallel_script_with_two_processes_is_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text("import torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2)).cuda()\n")
    monkeypatch.chdir(tmp_path)
    assert run(Request(script="train.py", nproc=2, quiet=True)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nproc 1" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


@pytest.mark.parametrize(("source", "expected"), [
    ('import os\nos.environ["MASTER_PORT"] = "12355"\n', True),
    ("os.environ.setdefault('MASTER_PORT', '29500')\n", True),
    ("dist.init_process_group('nccl', init_method='tcp://localhost:58472')\n", True),
    ("dist.init_process_group('nccl')\n", False),
    ("port = find_free_port()\nos.environ['MASTER_PORT'] = str(port)\n", False),
])
def test_fixed_rendezvous_port_runs_the_twins_one_after_the_other(tmp_path, source, expected):
    from npu_migrate.verify.detect import binds_fixed_port

    script = tmp_path / "train.py"
    script.write_text(source)
    assert binds_fixed_port(script) is expected
