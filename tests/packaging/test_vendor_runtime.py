"""``--vendor-runtime DIR``: written only with --write, marked so that every later run
skips it (never migrated, never reported), updated when npu-migrate bundles a newer
runtime, and what ``import npu_runtime`` resolves to from the entry point's directory."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main, vendor
from npu_migrate.pipeline import runtime_bundle

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_project"


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    from npu_migrate.pipeline import runner

    def no_pool(*args, **kwargs):
        raise runner._NoProcessPool

    monkeypatch.setattr(runner, "_until_broken", no_pool)


def _cli(*args):
    return CliRunner().invoke(main, [*map(str, args), "--no-cache", "--jobs", "1"])


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _bundle_files() -> dict[str, bytes]:
    return {k: v for k, v in _tree(runtime_bundle.directory()).items()
            if "__pycache__" not in k and ".egg-info" not in k}


@pytest.fixture
def repo(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "repo")
    return tmp_path / "repo"


@pytest.mark.timeout(120)
def test_a_dry_run_or_check_writes_nothing(repo):
    before = _tree(repo)
    dry = _cli(repo, "--vendor-runtime", repo, "--no-diff")
    assert dry.exit_code == 0 and "would copy npu_runtime" in dry.output
    check = _cli(repo, "--vendor-runtime", repo, "--check")
    assert check.exit_code == 1  # pending changes, and the copy is missing
    assert _tree(repo) == before


@pytest.mark.timeout(180)
def test_the_copy_is_marked_skipped_by_every_later_run_and_imported(repo, tmp_path):
    written = _cli(repo, "--vendor-runtime", repo, "--write", "--no-diff")
    assert written.exit_code == 0, written.output
    copy = repo / "npu_runtime"
    files = _tree(copy)
    assert files.pop(vendor.MARKER).startswith(f"npu_runtime {runtime_bundle.version()},".encode())
    assert files == _bundle_files()
    snapshot = _tree(copy)
    # later runs, walking the tree or naming a vendored file (as pre-commit does)
    report = tmp_path / "r.json"
    for args in ([repo, "--write"], [repo, "--check"], [copy / "preflight" / "launch_env.py", "--write"],
                 [copy / "preflight" / "launch_env.py", "--write", "--force-exclude"]):
        _cli(*args, "--report", report)
        paths = [f["path"] for f in json.loads(report.read_text())["files"]] if report.exists() else []
        assert not [p for p in paths if "npu_runtime" in Path(p).parts], paths
        report.unlink(missing_ok=True)
    assert _tree(copy) == snapshot
    # a vendored runtime is not declared: no NPU854 finding on a later plain run either
    later = _cli(repo, "--no-diff")
    assert "NPU854" not in later.output and "npu-runtime:" not in later.output, later.output
    # the entry point's `import npu_runtime` resolves to the copy
    (repo / "probe.py").write_text("import npu_runtime\nprint(npu_runtime.__file__)\n")
    out = subprocess.run([sys.executable, "probe.py"], cwd=repo, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert Path(out.strip()).resolve() == (copy / "__init__.py").resolve()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("where", ["third_party", "vendor/lib", "src/deps/vendored"])
def test_a_copy_below_the_root_is_found_by_later_runs(repo, where):
    """A copy in a subdirectory: a later plain run, over the tree or over one named file
    (pre-commit), neither declares npu-runtime nor reports it missing, and changes nothing."""
    (repo / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "1"\ndependencies = ["torch==2.1.0"]\n')
    written = _cli(repo, "--vendor-runtime", repo / where, "--write", "--no-diff")
    assert written.exit_code == 0, written.output
    assert "npu-runtime" not in (repo / "pyproject.toml").read_text()
    before = _tree(repo)
    for args in ([repo, "--write"], [repo / "train.py", "--write"]):
        later = _cli(*args, "--no-diff")
        assert "NPU854" not in later.output and "npu-runtime:" not in later.output, (args, later.output)
    assert _tree(repo) == before


@pytest.mark.timeout(120)
def test_an_older_copy_is_updated_a_newer_one_kept_a_foreign_one_refused(repo):
    assert _cli(repo, "--vendor-runtime", repo, "--write", "--no-diff").exit_code == 0
    init = repo / "npu_runtime" / "__init__.py"
    version = runtime_bundle.version()
    init.write_text(init.read_text().replace(f'__version__ = "{version}"', '__version__ = "0.0.1"'))
    assert _cli(repo, "--vendor-runtime", repo, "--check").exit_code == 1
    updated = _cli(repo, "--vendor-runtime", repo, "--write", "--no-diff")
    assert "updated" in updated.output and f'__version__ = "{version}"' in init.read_text()
    init.write_text(init.read_text().replace(f'__version__ = "{version}"', '__version__ = "99.0"'))
    kept = _cli(repo, "--vendor-runtime", repo, "--write", "--no-diff")
    assert "newer than" in kept.output and '__version__ = "99.0"' in init.read_text()
    (repo / "npu_runtime" / vendor.MARKER).unlink()
    refused = _cli(repo, "--vendor-runtime", repo, "--write")
    assert refused.exit_code == 2 and "was not vendored by npu-migrate" in refused.output
