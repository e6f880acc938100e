"""Code whose value nothing in the project reads is left unchanged (NPU012): a function
no file calls or names, an attribute no file reads. Held-out rounds 15 to 18:
``print_gpu_memory`` (direct-preference-optimization's utils.py), ``self.sync_cuda``
(improved-diffusion, consistency_models), peft's ``require_torch_gpu`` that no test used."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.facts import ProjectFacts

from ._files import write

UTILS = ("import torch\n\n\ndef print_gpu_memory(rank=None):\n    if torch.cuda.is_available():\n"
         "        print(torch.cuda.memory_allocated(), rank)\n\n\n"
         "def move(batch):\n    return batch.cuda()\n")
TRAIN = "from utils import move\n\n\ndef main(batch):\n    return move(batch)\n\n\nif __name__ == '__main__':\n    main(None)\n"


def test_a_function_nothing_calls_is_left_and_reported_once(tmp_path, run_cli):
    utils = write(tmp_path, "utils.py", UTILS)
    write(tmp_path, "train.py", TRAIN)
    result = run_cli("--write", "--no-cache", ".")
    text = utils.read_text()
    assert "torch.cuda.memory_allocated()" in text and "torch.cuda.is_available()" in text
    assert "batch.npu()" in text  # move() is called by train.py
    assert result.output.count("NPU012 `print_gpu_memory`") == 1
    assert "utils.py:9:5: NPU012 `print_gpu_memory` is never called or named anywhere else" in result.output


def test_deselected_the_function_is_migrated(tmp_path, run_cli):
    utils = write(tmp_path, "utils.py", UTILS)
    write(tmp_path, "train.py", TRAIN)
    run_cli("--write", "--no-cache", "--ignore", "NPU012", ".")
    assert "torch.npu.memory_allocated()" in utils.read_text()


@pytest.mark.parametrize("rel,text", [
    ("train.py", TRAIN + "\nprint_gpu_memory = None\n"),  # any other mention counts
    ("configs/debug.yaml", "hook:\n  _target_: utils.print_gpu_memory\n"),  # Hydra
    ("README.md", "Call `print_gpu_memory()` when debugging.\n"),
    ("scripts/report.ipynb", '{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null,'
                             ' "source": ["from utils import print_gpu_memory"]}], "metadata": {}, "nbformat": 4,'
                             ' "nbformat_minor": 5}'),
])
def test_a_function_named_anywhere_else_is_migrated(tmp_path, run_cli, rel, text):
    utils = write(tmp_path, "utils.py", UTILS)
    write(tmp_path, "train.py", TRAIN)
    write(tmp_path, rel, text)
    result = run_cli("--write", "--no-cache", ".")
    assert "torch.npu.memory_allocated()" in utils.read_text()
    assert "NPU012" not in result.output


@pytest.mark.parametrize("name,source", [
    ("utils.py", "import functools\n\n\n@functools.cache\ndef probe():\n    return torch.cuda.device_count()\n"),
    ("conftest.py", "def pytest_configure(config):\n    torch.cuda.set_device(0)\n"),
    ("conftest.py", "def gpu_count():\n    return torch.cuda.device_count()\n"),  # pytest reads conftest by name
    ("hubconf.py", "def resnet(pretrained=False):\n    return torch.zeros(1).cuda()\n"),
    ("utils.py", "def test_cuda():\n    torch.cuda.synchronize()\n"),
    ("cli.py", "import fire\n\n\ndef count():\n    return torch.cuda.device_count()\n\n\nfire.Fire()\n"),
    ("pkg/__init__.py", "def device_count():\n    return torch.cuda.device_count()\n"),
])
def test_functions_called_by_name_from_outside_are_migrated(tmp_path, run_cli, name, source):
    path = write(tmp_path, name, "import torch\n" + source)
    write(tmp_path, "train.py", TRAIN)
    write(tmp_path, "utils_other.py", "def move(batch):\n    return batch\n")
    run_cli("--write", "--no-cache", ".")
    assert "torch.npu." in path.read_text() or ".npu()" in path.read_text()


def test_a_package_public_function_is_its_api(tmp_path, run_cli):
    """Janus's ``janus/utils/io.py``: ``load_pretrained_model`` is for the package's users,
    none of them in the repository. Its private helpers are the package's own business."""
    io = write(tmp_path, "janus/utils/io.py",
               "import torch\n\n\ndef load_pretrained_model(model):\n    return model.cuda()\n\n\n"
               "def _unused(x):\n    return x.cuda()\n")
    write(tmp_path, "janus/__init__.py", "")
    write(tmp_path, "janus/utils/__init__.py", "")
    write(tmp_path, "train.py", TRAIN)
    result = run_cli("--write", "--no-cache", ".")
    assert "return model.npu()" in io.read_text() and "return x.cuda()" in io.read_text()
    assert "NPU012 `_unused` is never called" in result.output


def test_a_lone_file_is_not_a_project(tmp_path, run_cli):
    """What calls the functions of a project's only Python file is elsewhere."""
    utils = write(tmp_path, "utils.py", UTILS)
    run_cli("--write", "--no-cache", ".")
    assert "torch.npu.memory_allocated()" in utils.read_text()


def test_an_attribute_nothing_reads_is_left_silently(tmp_path, run_cli):
    """improved-diffusion's TrainLoop: ``self.sync_cuda = th.cuda.is_available()``, never read."""
    loop = write(tmp_path, "train_util.py",
                 "import torch as th\n\n\nclass TrainLoop:\n    def __init__(self, model):\n"
                 "        self.sync_cuda = th.cuda.is_available()\n        self.use_gpu = th.cuda.is_available()\n"
                 "        self.model = model.cuda()\n")
    write(tmp_path, "train.py", "from train_util import TrainLoop\n\n\nloop = TrainLoop(None)\nprint(loop.use_gpu)\n")
    result = run_cli("--write", "--no-cache", ".")
    text = loop.read_text()
    assert "self.sync_cuda = th.cuda.is_available()" in text
    assert "self.use_gpu = th.npu.is_available()" in text and "model.npu()" in text
    assert "NPU012" not in result.output


def test_an_attribute_whose_value_does_work_is_migrated(tmp_path, run_cli):
    loop = write(tmp_path, "train_util.py",
                 "class TrainLoop:\n    def __init__(self, model):\n        self.moved = model.cuda()\n")
    write(tmp_path, "train.py", "from train_util import TrainLoop\n\n\nTrainLoop(None)\n")
    run_cli("--write", "--no-cache", ".")
    assert "self.moved = model.npu()" in loop.read_text()


def test_the_answer_is_the_same_whatever_the_paths(tmp_path, run_cli):
    """Pre-commit passes one file; the facts still come from the whole project."""
    write(tmp_path, "pyproject.toml", '[project]\nname = "p"\n')
    write(tmp_path, "utils.py", UTILS)
    write(tmp_path, "train.py", TRAIN)
    for paths, cwd in ((("utils.py",), tmp_path), ((".",), tmp_path), ((tmp_path / "utils.py",), "/")):
        output = run_cli("--diff", "--no-cache", *paths, cwd=cwd).output
        assert "+    return batch.npu()" in output and "torch.npu.memory_allocated" not in output
        assert "`print_gpu_memory` is never called" in output


def test_the_facts_name_only_names_written_once():
    files = [("/p/a.py", b"def once():\n    pass\n\n\ndef twice():\n    pass\n"),
             ("/p/b.py", b"import a\na.twice()\nclass C:\n    def f(self):\n        self.x = 1\n")]
    facts = ProjectFacts.scan(files)
    assert facts.unread_names == frozenset({"once", "x"})
    assert ProjectFacts.scan(files[:1]).unread_names == frozenset()  # one file is no project
    called = ProjectFacts.scan(files + [("/p/c.py", b"from a import once\n")])
    assert called.unread_names == frozenset({"x"}) and called.key() != facts.key()
