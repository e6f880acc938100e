from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


@pytest.fixture(autouse=True, scope="session")
def _private_cache_home(tmp_path_factory):
    """The npu-migrate cache (per user, ``$XDG_CACHE_HOME/npu-migrate``) of the test run
    goes to a temporary directory, never to the real home; subprocesses inherit it."""
    import os

    home = tmp_path_factory.mktemp("xdg-cache")
    home.chmod(0o700)
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


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
