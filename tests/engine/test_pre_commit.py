"""Both pre-commit hooks with the real pre-commit, in a throwaway git repository that
uses a copy of this working tree as its hook repository (``repo:`` a path, ``rev:``
a real commit), offline: pre-commit's hook environment is a virtualenv that sees
the packages of the environment running the tests (its site-packages on
``PYTHONPATH``: never the base interpreter's, which a fresh venv's tests must not
need) and installs npu-migrate itself with pip, without an index and without
build isolation."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import CONSOLE_SCRIPT, CUDA

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MIGRATED = b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    torch.npu = torch.cuda\n\nn = torch.npu.device_count()\n"


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory) -> tuple[Path, str]:
    """This working tree (committed or not) as a git repository of its own; (path, commit)."""
    root = tmp_path_factory.mktemp("hooks") / "npu-migrate"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True, timeout=120).stdout.split(b"\0")
    for rel in filter(None, listed):
        source = REPO / os.fsdecode(rel)
        if source.is_file():
            target = root / os.fsdecode(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "npu-migrate")
    return root, _git(root, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_bytes(CUDA)
    (tmp_path / "third_party").mkdir()
    (tmp_path / "third_party" / "vendored.py").write_bytes(CUDA)
    (tmp_path / "clean.py").write_bytes(b"x = 1\n")
    (tmp_path / "pyproject.toml").write_text('[tool.npu-migrate]\nexclude = ["third_party/"]\n')
    return tmp_path


def _env(home: Path) -> dict[str, str]:
    """pre-commit's environment: offline, and the hook virtualenv sees this
    interpreter's site-packages (libcst, setuptools...) through PYTHONPATH. (The
    virtualenv's system site packages would be the base interpreter's: a fresh venv
    running the tests has none of them.) Editable installs there (.pth files) are not
    followed on PYTHONPATH, so the hook still installs npu-migrate from its repository."""
    import sysconfig

    paths = sysconfig.get_paths()
    site = os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUALENV_SYSTEM_SITE_PACKAGES", "VIRTUAL_ENV")}
    return {**env, "PRE_COMMIT_HOME": str(home), "PYTHONPATH": site,
            "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
            "PATH": f"{CONSOLE_SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=_env(home), capture_output=True,
                          text=True, timeout=600, check=False)


def _config(project: Path, repo: Path, rev: str, *hooks: str) -> None:
    lines = ["repos:", f"  - repo: {repo}", f"    rev: {rev}", "    hooks:", *[f"      - id: {h}" for h in hooks]]
    (project / ".pre-commit-config.yaml").write_text("\n".join(lines) + "\n")
    _git(project, "add", "-A")


def test_check_hook_fails_without_touching_files(project, hooks_repo, pre_commit_home):
    _config(project, *hooks_repo, "npu-migrate-check")
    result = pre_commit(project, pre_commit_home, "run", "--all-files")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "+n = torch.npu.device_count()" in result.stdout and "would migrate: train.py" in result.stdout
    assert "vendored" not in result.stdout  # --force-exclude: exclude holds for the files pre-commit names
    assert (project / "train.py").read_bytes() == CUDA


def test_fix_hook_rewrites_then_passes(project, hooks_repo, pre_commit_home):
    _config(project, *hooks_repo, "npu-migrate", "npu-migrate-check")
    first = pre_commit(project, pre_commit_home, "run", "--all-files")
    assert first.returncode == 1 and "files were modified by this hook" in first.stdout, first.stdout + first.stderr
    assert (project / "train.py").read_bytes() == MIGRATED
    assert (project / "third_party" / "vendored.py").read_bytes() == CUDA
    _git(project, "add", "-A")
    second = pre_commit(project, pre_commit_home, "run", "--all-files")
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("Passed") == 2


def test_commit_is_blocked_until_the_migration_is_staged(project, hooks_repo, pre_commit_home):
    _config(project, *hooks_repo, "npu-migrate")
    assert pre_commit(project, pre_commit_home, "install").returncode == 0
    commit = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "train"]
    env = _env(pre_commit_home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    blocked = subprocess.run(commit, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert blocked.returncode != 0 and (project / "train.py").read_bytes() == MIGRATED
    _git(project, "add", "-A")
    done = subprocess.run(commit, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _readme_block(title: str) -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### pre-commit"):]
    return re.search(rf"```yaml\n(# {re.escape(title)}.*?)```", section, re.DOTALL).group(1)


def test_readme_config_resolves_with_autoupdate(project, hooks_repo, pre_commit_home):
    """The README's snippet, with only the repository's address replaced, becomes a
    working configuration after the `pre-commit autoupdate` it tells users to run."""
    repo, commit = hooks_repo
    snippet = _readme_block("remote")
    config = re.sub(r"repo: \S+", f"repo: {repo}", snippet)
    (project / ".pre-commit-config.yaml").write_text(config)
    _git(project, "add", "-A")
    update = pre_commit(project, pre_commit_home, "autoupdate")
    assert update.returncode == 0, update.stdout + update.stderr
    assert re.search(rf"rev: \"?{commit}\"?", (project / ".pre-commit-config.yaml").read_text())
    _git(project, "add", "-A")
    result = pre_commit(project, pre_commit_home, "run", "--all-files")
    assert result.returncode == 1 and (project / "train.py").read_bytes() == MIGRATED


def test_readme_local_hook_uses_the_installed_tool(project, pre_commit_home):
    (project / ".pre-commit-config.yaml").write_text(_readme_block("local"))
    _git(project, "add", "-A")
    result = pre_commit(project, pre_commit_home, "run", "--all-files")
    assert result.returncode == 1 and "files were modified by this hook" in result.stdout, result.stdout
    assert (project / "train.py").read_bytes() == MIGRATED
    assert (project / "third_party" / "vendored.py").read_bytes() == CUDA
