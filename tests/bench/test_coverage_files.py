"""The repository-files audit (bench/coverage_files.py) and its corpus (bench/repo_corpus.py):
the scanners find what they look for and nothing in prose, derived notebooks are
valid, and an audit of a small tree classifies leftovers as reported or silent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

from bench import coverage_files as cf
from bench.repo_corpus import RepoProject, notebook_from_script, wanted


def test_config_scanners_find_values_not_prose():
    yaml_hits = cf.scan_yaml("device: cuda:0\nnote: train on cuda\nenv: {CUDA_VISIBLE_DEVICES: '0'}\nbackend: nccl\n")
    assert [(h.line, h.pattern) for h in yaml_hits] == [
        (1, "cuda device value"), (3, "CUDA/NCCL env var"), (4, "nccl value")]
    json_hits = cf.scan_quoted('{"device": "cuda", "note": "cuda is fast"}\n', toml=False)
    assert [(h.line, h.pattern) for h in json_hits] == [(1, "cuda device value")]
    toml_hits = cf.scan_quoted('backend = "nccl"  # "cuda"\nCUDA_VISIBLE_DEVICES = 1\n', toml=True)
    assert [(h.line, h.pattern) for h in toml_hits] == [(1, "nccl value"), (2, "CUDA/NCCL env var")]


def test_deps_scanner():
    text = "torch==2.1.0\nflash-attn\n--extra-index-url https://download.pytorch.org/whl/cu118\nnumpy\n"
    hits = {(h.line, h.pattern) for h in cf.scan_deps("requirements.txt", text)}
    assert hits == {(1, "torch without torch-npu"), (2, "CUDA-only package"), (3, "CUDA index")}
    assert not any(h.pattern == "torch without torch-npu"
                   for h in cf.scan_deps("requirements.txt", text + "torch-npu==2.1.*\n"))


def test_notebook_scanner_names_the_cell():
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("torch.cuda"),
        nbformat.v4.new_code_cell("%env CUDA_VISIBLE_DEVICES=0\nimport torch\n!nvidia-smi\ntorch.cuda.synchronize()"),
    ])
    hits = cf.scan_notebook(nbformat.writes(notebook).encode())
    assert {(h.cell, h.line, h.pattern) for h in hits} == {(1, 1, "%env CUDA/NCCL variable"), (1, 4, "torch.cuda")}


def test_derived_notebooks_are_valid_and_keep_the_code():
    script = "import torch\nimport os\n\n# train\ndef main():\n    torch.cuda.synchronize()\n\n\nif __name__ == '__main__':\n    main()\n"
    notebook = nbformat.reads(notebook_from_script(script), as_version=4)
    nbformat.validate(notebook)
    assert [c.source for c in notebook.cells] == [
        "%load_ext autoreload\n%autoreload 2", "import torch\nimport os", "def main():\n    torch.cuda.synchronize()",
        "if __name__ == '__main__':\n    main()"]


def test_which_repository_files_are_taken():
    assert wanted("configs/a.yaml") and wanted("requirements/runtime.txt") and wanted("tools/dist_train.sh")
    assert not wanted("pkg.egg-info/requires.txt") and not wanted("README.md") and not wanted("x.py")


@pytest.mark.timeout(600)
def test_audit_of_a_small_tree(tmp_path, monkeypatch):
    root = tmp_path / "demo-1.0"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "train.yaml").write_text("device: cuda\nworkers: {gpu: cuda:1}\n")
    (root / "requirements.txt").write_text("torch==2.1.0\nxformers\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch\nx = torch.cuda.nvtx")])
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    (root / "nb.ipynb").write_text(nbformat.writes(notebook))
    monkeypatch.setenv("NPU_MIGRATE_CMD", f"{sys.executable} -m npu_migrate")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    project = RepoProject("demo", "1.0", root, ["conf/train.yaml", "nb.ipynb", "requirements.txt"])
    audit = cf.audit_files([project], log=lambda message: None)
    # requirements.txt is what every machine installs: its torch-npu is reported, not added (NPU850)
    assert audit.files == 3 and audit.changed == 1 and audit.ok(), cf.render_files(audit, [project])
    assert {(x.path, x.pattern, x.status) for x in audit.leftovers} == {
        ("demo-1.0/conf/train.yaml", "cuda device value", "reported"),
        ("demo-1.0/requirements.txt", "CUDA-only package", "reported"),
        ("demo-1.0/requirements.txt", "torch without torch-npu", "reported"),
        ("demo-1.0/nb.ipynb", "torch.cuda", "reported"),
    }
    assert json.loads((root / "nb.ipynb").read_text())  # the corpus itself is never written
    assert "| **total** |" in cf.render_files(audit, [project])


def test_shell_hits_know_where_their_command_starts():
    hits = cf.scan_shell("# nvidia-smi in a comment\necho nvidia-smi\nA=1 \\\n  python -m torch.distributed.launch \\\n  x.py\nnvidia-smi\n")
    assert [(h.line, h.first, h.pattern) for h in hits] == [(4, 3, "torch.distributed.launch"), (6, 6, "nvidia-smi")]
