"""A file in a folder with no project marker above it (issue 38, round 6): a file
directly in ``/tmp`` or ``~/Downloads``, as an editor or pre-commit hook names it.

Such a folder is a project of its own files (``config.project_root``: each unmarked
folder stands alone), so its subfolders never held facts of that project; the old code
still walked the whole folder tree to find that out (``npu-migrate /tmp/x.py`` ran for
over an hour). The answer is the same as before, the subfolders are not walked, and a
folder with a marker is still searched whole.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main
from npu_migrate.pipeline.config import PROJECT_MARKERS, project_root

TRAIN = (
    "import argparse\n\nimport torch\n\nfrom engine import train_one_epoch\n\n\n"
    "def main():\n    parser = argparse.ArgumentParser()\n    parser.add_argument('--device', default='cuda')\n"
    "    args = parser.parse_args()\n    model = torch.nn.Linear(2, 2).to(args.device)\n"
    "    train_one_epoch(model)\n\n\nif __name__ == '__main__':\n    main()\n"
)
ENGINE = ("import torch\n\n\ndef train_one_epoch(model):\n    x = torch.zeros(2).cuda()\n"
          "    model(x).sum().backward()\n    torch.cuda.synchronize()\n")
#: what a subfolder holds: files of other (unmarked, so one-folder) projects
DEEP = "import torch\n\nprint(torch.cuda.device_count())\n"


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    from npu_migrate.pipeline import runner

    def no_pool(*args, **kwargs):
        raise runner._NoProcessPool

    monkeypatch.setattr(runner, "_until_broken", no_pool)


def _folder(base: Path, marker: str | None = None) -> Path:
    lone = base / "lone"
    for i in range(3):
        deep = lone / f"d{i}" / "e" / "f"
        deep.mkdir(parents=True)
        (deep / "m.py").write_text(DEEP)
    (lone / "train.py").write_text(TRAIN)
    (lone / "engine.py").write_text(ENGINE)
    if marker:
        (lone / marker).write_text("")
    return lone


@pytest.fixture
def walked(monkeypatch):
    """The directories every ``os.walk`` of the run went through."""
    seen: list[str] = []
    real = os.walk

    def spy(top, *args, **kwargs):
        for entry in real(top, *args, **kwargs):
            seen.append(os.path.abspath(entry[0]))
            yield entry

    monkeypatch.setattr(os, "walk", spy)
    return seen


def _invoke(monkeypatch, cwd: Path, *args: str, input: bytes | None = None):
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, [*args, "--no-cache", "--quiet", "--jobs", "1"], input=input,
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result


def marked(directory: Path) -> bool:
    return any((directory / name).exists() for name in PROJECT_MARKERS)


def _no_marker_above(path: Path) -> None:
    if any(marked(d) for d in (path, *path.parents)):
        pytest.skip(f"a project marker above {path}")


@pytest.mark.timeout(60)
def test_a_lone_file_does_not_walk_its_folders_subfolders(tmp_path, monkeypatch, walked):
    lone = _folder(tmp_path)
    _no_marker_above(lone)
    assert project_root(lone / "train.py") == str(lone) and not marked(lone)
    _invoke(monkeypatch, tmp_path, "lone/train.py", "--write")
    assert "npu_runtime.install()" in (lone / "train.py").read_text(), "the sibling engine.py's facts still count"
    assert [d for d in walked if d.startswith(str(lone) + os.sep)] == [], "subfolders of an unmarked folder were walked"


@pytest.mark.timeout(60)
def test_standard_input_with_a_lone_file_name_does_not_walk_subfolders(tmp_path, monkeypatch, walked):
    lone = _folder(tmp_path)
    _no_marker_above(lone)
    out = _invoke(monkeypatch, lone, "-", "--stdin-filename", "train.py", input=TRAIN.encode()).stdout
    assert "npu_runtime.install()" in out
    assert [d for d in walked if d.startswith(str(lone) + os.sep)] == []


@pytest.mark.timeout(120)
def test_the_answer_for_a_lone_file_is_the_folders(tmp_path, monkeypatch):
    """The same bytes for the file named alone, through stdin, and in a run over the
    folder (which does walk the subfolders: they are files of the run)."""
    outputs = {}
    for form in ("file", "stdin", "folder"):
        lone = _folder(tmp_path / form)
        _no_marker_above(lone)
        if form == "stdin":
            outputs[form] = _invoke(monkeypatch, lone, "-", "--stdin-filename", "train.py",
                                    input=TRAIN.encode()).stdout_bytes
            continue
        _invoke(monkeypatch, lone.parent, "lone/train.py" if form == "file" else "lone", "--write")
        outputs[form] = (lone / "train.py").read_bytes()
    assert b"npu_runtime.install()" in outputs["folder"]
    assert outputs["file"] == outputs["folder"] == outputs["stdin"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("marker", ["pyproject.toml", ".git"])
def test_a_folder_with_a_marker_is_still_searched_whole(tmp_path, monkeypatch, walked, marker):
    lone = _folder(tmp_path, marker)
    if marker == ".git":
        (lone / ".git").unlink()
        (lone / ".git").mkdir()
    _invoke(monkeypatch, tmp_path, "lone/train.py")
    assert {str(lone / f"d{i}" / "e" / "f") for i in range(3)} <= set(walked)
