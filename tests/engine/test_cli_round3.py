"""Command-line conventions, round 3 (issue 37.5): ``--statistics`` prints counts only,
``-q``/``-qq`` as ruff's ``-q``/``-s``, ``-V``, a missing path is a usage error before
anything is scanned (with "did you mean" for a mistyped subcommand), library warnings
are printed once as the tool's own line, the README's pre-commit snippet matches the
hook manifest, and the summary says how to get npu-runtime."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from npu_migrate import __version__

from .test_cli import CONSOLE_SCRIPT, CUDA, write

REPO = Path(__file__).resolve().parents[2]
FINDING = b"import torch\nn = torch.cuda.device_count()\ntorch.cuda.nvtx.range_push('a')\n"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CONSOLE_SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)


def test_statistics_prints_counts_only(tmp_path, run_cli):
    write(tmp_path, "a.py", FINDING)
    result = run_cli(".", "--no-cache", "--statistics")
    assert result.exit_code == 0, result.output
    assert "+++" not in result.output and "@@" not in result.output  # no diff
    assert "a.py:" not in result.output  # no line per finding
    rows = [line.split() for line in result.output.splitlines() if re.match(r"\s*\d+\s+NPU\d{3}\s", line)]
    assert ["1", "NPU101", "fixable", "torch-cuda-api"] in rows
    assert "1 file(s) scanned" in result.output
    assert "fixes:" not in result.output  # the table already has them
    assert "+++" in run_cli(".", "--no-cache", "--statistics", "--diff").output  # asked for


def test_statistics_grouped_is_counts_only_too(tmp_path, run_cli):
    write(tmp_path, "a.py", FINDING)
    out = run_cli(".", "--no-cache", "--statistics", "--output-format", "grouped").output
    assert "a.py:" not in out and "NPU101" in out


def test_quiet_prints_the_findings_and_nothing_else(tmp_path):
    write(tmp_path, "a.py", FINDING)
    result = cli(tmp_path, ".", "--no-cache", "-q")
    assert result.returncode == 0
    assert result.stdout == ""  # no diff
    assert "a.py:3:1: NPU102" in result.stderr
    assert "file(s) scanned" not in result.stderr and "Run again" not in result.stderr


@pytest.mark.parametrize("flags", [["-qq"], ["-q", "-q"], ["-s"], ["--silent"]])
def test_qq_is_silent_but_keeps_the_exit_code(tmp_path, flags):
    write(tmp_path, "a.py", FINDING)
    result = cli(tmp_path, ".", "--no-cache", "--check", *flags)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "")


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(tmp_path, flag):
    result = cli(tmp_path, flag)
    assert result.returncode == 0 and result.stdout.strip() == f"npu-migrate, version {__version__}"


def test_a_mistyped_subcommand_says_did_you_mean_and_scans_nothing(tmp_path):
    write(tmp_path, "train.py", CUDA)
    result = cli(tmp_path, "explan", "train.py:1")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: explan: no such file or directory (did you mean `npu-migrate explain`?)"]
    assert result.stdout == ""


def test_a_missing_directory_is_an_error_before_scanning(tmp_path):
    write(tmp_path, "a.py", CUDA)
    result = cli(tmp_path, "src", "--no-cache")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: src: no such file or directory"]
    missing_two = cli(tmp_path, "a.py", "nope", "gone.py", "--no-cache")
    assert missing_two.returncode == 2 and missing_two.stdout == ""
    assert missing_two.stderr.splitlines() == ["error: nope: no such file or directory",
                                               "error: gone.py: no such file or directory"]


def test_the_subcommand_list_for_did_you_mean_is_the_applications():
    from npu_migrate.cli.app import main
    from npu_migrate.cli.prepare import SUBCOMMANDS

    assert set(SUBCOMMANDS) == set(main.commands) - {"migrate"}


def _notebook_without_cell_ids() -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": ["import torch\n", "x = torch.zeros(1).cuda()\n"]}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.parametrize("cache", [["--no-cache"], []])
def test_a_library_warning_is_printed_once_as_the_tools_own_line(tmp_path, cache):
    for name in ("a", "b", "c"):
        write(tmp_path, f"{name}.ipynb", _notebook_without_cell_ids())
    for _ in range(2):  # the second run reads the cache when there is one
        result = cli(tmp_path, ".", "-j", "2", *cache)
        assert result.returncode == 0, result.stderr
        lines = [line for line in result.stderr.splitlines() if "MissingIDFieldWarning" in line]
        assert lines == [("warning: nbformat MissingIDFieldWarning: Cell is missing an id field, this will become "
                          "a hard error in future nbformat versions (3 files, first a.ipynb)")], result.stderr
        assert "validator.py" not in result.stderr
    assert "MissingIDFieldWarning" not in cli(tmp_path, ".", "-q", "--no-cache").stderr


def _types_or(text: str) -> list[list[str]]:
    return [[t.strip() for t in m.split(",")] for m in re.findall(r"types_or:\s*\[([^\]]*)\]", text)]


def test_the_readme_pre_commit_snippet_passes_the_manifests_types():
    manifest = _types_or((REPO / ".pre-commit-hooks.yaml").read_text())
    readme = (REPO / "README.md").read_text()
    snippets = _types_or(readme[readme.index("### pre-commit"):])
    assert manifest and snippets
    assert all(types == manifest[0] for types in manifest + snippets), (manifest, snippets)
    listed = readme[readme.index("### pre-commit"):].split("pass exactly the files")[0]
    assert re.findall(r"`(\w+)`", listed.split("types_or")[-1]) == manifest[0]


def test_the_summary_says_how_to_get_npu_runtime(tmp_path, run_cli):
    from npu_migrate.pipeline import runtime_bundle

    version = runtime_bundle.version()
    write(tmp_path, "train.py", b"import torch\nmodel = torch.nn.Linear(1, 1).cuda()\nfor step in range(3):\n"
                                b"    model(torch.zeros(1, 1).cuda()).sum().backward()\n")
    write(tmp_path, "requirements.txt", "torch==2.13.0\n")
    out = run_cli(".", "--no-cache", "--entry", "train.py").output
    hint = [line.strip() for line in out.splitlines() if "--vendor-runtime DIR" in line]
    assert hint == [(f"npu-runtime {version} is imported by 1 migrated file(s): install it with "
                     f"`pip install npu-runtime=={version}`, or vendor it with `--vendor-runtime DIR` where "
                     "your index lacks it")], out
    vendored = run_cli(".", "--no-cache", "--entry", "train.py", "--vendor-runtime", "vendor").output
    assert "where your index lacks it" not in vendored


def test_no_runtime_no_hint(tmp_path, run_cli):
    write(tmp_path, "a.py", CUDA)
    assert "npu-runtime" not in run_cli(".", "--no-cache").output
