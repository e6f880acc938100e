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


# -- parallel runs (pytest-xdist: the README's `python -m pytest -n 2`) ----------------
#
# Work is handed out by file, as `--dist loadfile` does, so that a module's fixtures
# (a pre-commit environment, a corpus download, a resumed training run) are made once;
# tests/e2e and tests/emulator each go to one worker as a whole, because their session
# fixtures (the migrated workspace and its CPU reference runs; the emulator's probe,
# training and op-parity runs) are shared by many files and cost minutes to make again;
# tests/runtime goes to one worker as a whole too, so that its timing-sensitive process
# tests (watchdog timeouts of a few seconds) never run beside one another: under -n 2 at
# load ~25 one of them (a spawned child starved past a 4 s watchdog) failed once when
# runtime files ran on both workers.
# Files with slow tests are handed out first (longest first, so that no worker is left
# with a long file at the end). Only the default `--dist load` is replaced: an explicit
# `--dist` is kept. A serial run (no -n) is untouched.
SHARED_SESSION_FOLDERS = ("tests/e2e/", "tests/emulator/", "tests/runtime/")


def _scope(nodeid: str) -> str:
    for folder in SHARED_SESSION_FOLDERS:
        if nodeid.startswith(folder):
            return folder
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # keep the slow-first order made below
    return ByFile(config, log)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # not an xdist worker: the order as written
        return
    slow_scopes = {_scope(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: _scope(item.nodeid) not in slow_scopes)  # stable: files stay in order
