"""Lines of a ``.gitignore`` that git reads as invalid or as matching nothing (a lone
``!``, ``!/``, a trailing ``\\``) are read as git reads them: no traceback, no path
un-ignored (issue 38 item 5). git itself (``git check-ignore``) is the reference."""

from __future__ import annotations

import subprocess

import pytest

from npu_migrate.pipeline.discovery import gitignore_spec

ODD_LINES = ["!", "!   ", "\\", "a\\", "!\\", "/", "!/", "!/  ", "!//", "//", "[", "[]", "[!]", "!!", "\\!", "!**/",
             "!*", "**", "!build/", "   "]
PATHS = ["a.py", "c.txt", "build/b.py", "build/deep/d.py"]


def _git_ignores(root, path: str) -> bool:
    done = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", "--no-index", path], capture_output=True,
                          timeout=60, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("line", ODD_LINES)
def test_an_odd_gitignore_line_is_read_as_git_reads_it(tmp_path, line):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    lines = ["build/", line]
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    spec = gitignore_spec(lines)
    for path in PATHS:
        assert spec.match_file(path) == _git_ignores(tmp_path, path), (line, path)
