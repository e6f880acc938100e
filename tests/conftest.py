from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@pytest.fixture
def run_cli(tmp_path, monkeypatch):
    """Run the real console entry point in-process, from ``cwd`` (default tmp_path)."""
    from click.testing import CliRunner

    from npu_migrate.cli import main

    def run(*args, cwd=None, input=None):
        monkeypatch.chdir(cwd or tmp_path)
        runner = CliRunner()
        return runner.invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)

    return run
