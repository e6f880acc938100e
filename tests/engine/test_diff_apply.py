"""The diff is a patch ``git apply`` accepts, byte for byte: for every fixture, for
files with unusual line endings and separators, and for unusual file names."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npu_migrate.cli.output import git_quoted, unified_diff
from tests.rules.golden import ROOT as FIXTURES
from tests.rules.golden import cases

CONSOLE_SCRIPT = Path(sys.executable).parent / "npu-migrate"
CUDA = "import torch\nx = torch.zeros(1).cuda()\n"

#: Files whose bytes a patch must carry exactly (name -> content).
SPECIAL = {
    "crlf.py": CUDA.replace("\n", "\r\n").encode(),
    "cr_only.py": CUDA.replace("\n", "\r").encode(),
    "mixed_endings.py": b"import torch\r\n# a\rb\nx = torch.zeros(1).cuda()\r\n",
    "form_feed.py": b"import torch\nx = 1\n\fy = torch.zeros(1).cuda()\n",
    "file_separator.py": b"import torch\n# a\x1cb\nx = torch.zeros(1).cuda()\n",
    "line_separator.py": "import torch\n# a\u2028b\u2029c\x85d\nx = torch.zeros(1).cuda()\n".encode(),
    "latin1.py": "# -*- coding: latin-1 -*-\nimport torch\n# café\nx = torch.zeros(1).cuda()\n".encode("latin-1"),
    "bom.py": b"\xef\xbb\xbf" + CUDA.encode(),
    "no_final_newline.py": CUDA.rstrip("\n").encode(),
    "trailing_spaces.py": b"import torch   \nx = torch.zeros(1).cuda()\t\n",
}
#: Names git quotes in a diff header, or marks with a trailing tab.
ODD_NAMES = ["with space.py", "new\nline.py", 'quote".py', "back\\slash.py", "tab\tbed.py", "café.py", "x\x7f.py"]


def git_apply(tree: Path, patch: bytes) -> None:
    assert shutil.which("git"), "the diff tests need git"
    (tree.parent / "p.patch").write_bytes(patch)
    applied = subprocess.run(["git", "apply", "--verbose", str(tree.parent / "p.patch")], cwd=tree,
                             capture_output=True, text=True, timeout=120, check=False)
    assert applied.returncode == 0, applied.stderr


def test_every_fixture_diff_applies_with_git(tmp_path):
    tree, patch, expected = tmp_path / "tree", [], {}
    for case in cases():
        if case.after is None:
            continue
        rel = case.before.relative_to(FIXTURES).as_posix()
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_bytes(case.before.read_bytes())
        patch.append(unified_diff(rel, case.before.read_bytes(), case.after.read_bytes()))
        expected[rel] = case.after.read_bytes()
    assert len(expected) >= 40 and all(patch)
    assert {Path(rel).suffix for rel in expected} >= {".py", ".sh", ".Dockerfile"}
    git_apply(tree, b"".join(patch))
    assert {rel: (tree / rel).read_bytes() for rel in expected} == expected


@pytest.mark.parametrize("names", [list(SPECIAL), ODD_NAMES], ids=["special-content", "odd-names"])
def test_the_dry_run_output_is_a_patch_git_applies(tmp_path, names):
    """``npu-migrate src > migration.patch`` then ``git apply`` gives what ``--write`` gives."""
    for copy in ("dry", "applied", "written"):
        (tmp_path / copy).mkdir()
        for name in names:
            (tmp_path / copy / name).write_bytes(SPECIAL.get(name, CUDA.encode()))
    dry = subprocess.run([str(CONSOLE_SCRIPT), "--no-cache", "."], cwd=tmp_path / "dry", capture_output=True,
                         timeout=120, check=False)
    assert dry.returncode == 0, dry.stderr
    assert sum(line.startswith(b"+++ ") for line in dry.stdout.split(b"\n")) == len(names)  # one header per file
    written = subprocess.run([str(CONSOLE_SCRIPT), "--no-cache", "--write", "."], cwd=tmp_path / "written",
                             capture_output=True, timeout=120, check=False)
    assert written.returncode == 0, written.stderr
    git_apply(tmp_path / "applied", dry.stdout)
    for name in names:
        assert (tmp_path / "applied" / name).read_bytes() == (tmp_path / "written" / name).read_bytes(), name
        assert (tmp_path / "written" / name).read_bytes() != SPECIAL.get(name, CUDA.encode())


@pytest.mark.parametrize(
    ("name", "header"),
    [
        (b"a/plain.py", b"a/plain.py"),
        (b"a/with space.py", b"a/with space.py\t"),
        (b"a/new\nline.py", b'"a/new\\nline.py"'),
        (b'a/q"uote.py', b'"a/q\\"uote.py"'),
        (b"a/back\\slash.py", b'"a/back\\\\slash.py"'),
        ("a/café.py".encode(), b'"a/caf\\303\\251.py"'),
        (b"a/bell\a and space.py", b'"a/bell\\a and space.py"\t'),
    ],
)
def test_names_are_quoted_as_git_quotes_them(name, header):
    assert git_quoted(name) == header


def test_lines_split_at_newlines_only():
    old = "x = 1\r\n# a\x0cb\x1cc\u2028d\ry = 2\n".encode()
    new = old.replace(b"y = 2", b"y = 3")
    assert unified_diff("t.py", old, new) == (
        b"--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,2 @@\n x = 1\r\n"
        + b"-" + old.split(b"\n")[1] + b"\n+" + new.split(b"\n")[1] + b"\n"
    )
