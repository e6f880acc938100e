"""One answer whatever the paths (issue 35.3): the output for a file is byte-identical
whether the tool is given the file, its folder, the repository root, a pre-commit file
list or standard input with ``--stdin-filename``, from any working directory.

The fixture is a small repository with an entry point that trains through a library
module of its own (the entry point gets ``npu_runtime.install()``, the library module
must not: what tells them apart is the project's import graph, which a run over one
file must see too), and a nested second project (its own ``pyproject.toml``), whose
facts must not leak into the outer one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main

FILES = {
    "pyproject.toml": "[project]\nname = 'outer'\nversion = '0'\n",
    "requirements.txt": "torch==2.13.0\n",
    "train.py": (
        "import argparse\n\nimport torch\n\nfrom engine import train_one_epoch\n\n\n"
        "def main():\n    parser = argparse.ArgumentParser()\n    parser.add_argument('--device', default='cuda')\n"
        "    args = parser.parse_args()\n    model = torch.nn.Linear(2, 2).to(args.device)\n"
        "    train_one_epoch(model)\n\n\nif __name__ == '__main__':\n    main()\n"
    ),
    "engine.py": (
        "import torch\n\n\ndef train_one_epoch(model):\n    x = torch.zeros(2).cuda()\n"
        "    model(x).sum().backward()\n    torch.cuda.synchronize()\n"
    ),
    "tools/report.py": "import torch\n\nprint(torch.cuda.device_count())\n",
    # a nested project: its own facts (its sampler's set_epoch is not the outer one's)
    "sub/pyproject.toml": "[project]\nname = 'inner'\nversion = '0'\n",
    "sub/run.py": (
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n\n"
        "sampler = DistributedSampler(range(8))\nloader = DataLoader(range(8), sampler=sampler)\n"
        "for epoch in range(2):\n    sampler.set_epoch(epoch)\n"
        "    for x in loader:\n        torch.zeros(1).cuda().sum().backward()\n"
    ),
}
TARGETS = ["train.py", "engine.py", "tools/report.py", "sub/run.py"]


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    from npu_migrate.pipeline import runner

    def no_pool(*args, **kwargs):
        raise runner._NoProcessPool

    monkeypatch.setattr(runner, "_until_broken", no_pool)


def _make(base: Path) -> Path:
    repo = base / "repo"
    for name, text in FILES.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    return repo


def _invoke(monkeypatch, cwd: Path, *args: str, input: bytes | None = None):
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, [*args, "--no-cache", "--quiet", "--jobs", "1"], input=input,
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result


def _rel(path: Path, cwd: Path) -> str:
    import os

    return os.path.relpath(path, cwd)


def _written(tmp_path, monkeypatch, form: str, where: str, target: str) -> bytes:
    """The file ``target`` after ``--write`` in a fresh copy of the repository, the tool
    called in ``form`` from the working directory ``where``."""
    base = tmp_path / f"{form}-{where}-{target.replace('/', '_')}"
    repo = _make(base)
    cwd = {"root": repo, "inside": repo / "tools", "parent": base}[where]
    file = repo / target
    if form == "stdin":
        result = _invoke(monkeypatch, cwd, "-", "--stdin-filename", _rel(file, cwd), input=file.read_bytes())
        return result.stdout_bytes
    paths = {
        "file": [file],
        "folder": [file.parent],
        "root": [repo],
        "pre-commit": [repo / t for t in TARGETS],
    }[form]
    _invoke(monkeypatch, cwd, *(_rel(p, cwd) for p in paths), "--write")
    return file.read_bytes()


FORMS = ["file", "folder", "root", "pre-commit", "stdin"]
PLACES = ["root", "inside", "parent"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", TARGETS)
def test_every_invocation_form_gives_the_same_bytes(tmp_path, monkeypatch, target):
    outputs = {(form, where): _written(tmp_path, monkeypatch, form, where, target)
               for form in FORMS for where in PLACES}
    reference = outputs["root", "root"]
    assert reference != FILES[target].encode(), "the fixture file must need migrating"
    differing = sorted(key for key, value in outputs.items() if value != reference)
    assert differing == [], f"{target}: output differs from `npu-migrate .` for {differing}"


def test_the_outputs_are_the_ones_the_project_facts_call_for(tmp_path, monkeypatch):
    """What the shared answer is: train.py (the entry point) installs the runtime,
    engine.py (imported by train.py: library code) does not, and every file imports
    torch_npu guarded; the nested project keeps its own set_epoch."""
    repo = _make(tmp_path)
    _invoke(monkeypatch, repo / "tools", "../engine.py", "--write")  # alone, as pre-commit may pass it
    engine = (repo / "engine.py").read_text()
    assert "npu_runtime" not in engine and "except ModuleNotFoundError:" in engine
    _invoke(monkeypatch, tmp_path, "repo/train.py", "--write")
    train = (repo / "train.py").read_text()
    assert "npu_runtime.install()" in train and "except ModuleNotFoundError:" in train


def test_a_vendored_copy_of_another_project_is_not_this_ones(tmp_path, monkeypatch):
    """Run from a parent directory, the vendored runtime of a project below it does not
    stop the other project from declaring npu-runtime."""
    from npu_migrate.cli.vendor import MARKER

    repo = _make(tmp_path)
    other = tmp_path / "other" / "npu_runtime"
    other.mkdir(parents=True)
    (other / MARKER).write_text("npu_runtime 0.1.0, vendored\n")
    (tmp_path / "other" / "setup.py").write_text("")
    _invoke(monkeypatch, tmp_path, "repo", "--write")
    assert "npu-runtime" in (repo / "requirements.txt").read_text()


def test_project_root_is_found_from_the_file(tmp_path, monkeypatch):
    from npu_migrate.pipeline.config import project_root

    repo = _make(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert project_root("repo/tools/report.py") == str(repo)
    assert project_root(repo / "sub" / "run.py") == str(repo / "sub")
    monkeypatch.chdir(repo / "sub")
    assert project_root("../engine.py") == str(repo)
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "x.py").write_text("")
    assert project_root(lone / "x.py") == str(lone) or Path(project_root(lone / "x.py")) in lone.parents
