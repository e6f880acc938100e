"""A last-resort time limit for the runtime tests that also works when the GIL is held.

pytest-timeout (``timeout_method = "thread"`` in pyproject.toml) dumps every thread's
stack and ends the session when a test runs past its limit, but its timer is a Python
thread: a test deadlocked in C code that holds the GIL (the gloo teardown chain in
docs/e2e.md, "Exit aborts") never lets it run. faulthandler's C timer does: armed 30 s
past the test's limit, it dumps every thread's stack and exits with status 1. (A
watchdog test that arms faulthandler itself replaces it for the rest of that test.)
"""

import faulthandler
import sys

import pytest

GRACE_S = 30


def _limit(item) -> float | None:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    try:
        value = item.config.getini("timeout")
    except ValueError:  # pytest-timeout not installed
        return None
    return float(value) if value else None


def _terminal_stderr(config):
    """pytest's copy of stderr from before output capture (its faulthandler plugin
    keeps it); with capture on, fd 2 is a temporary file that an exit throws away."""
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key

        return config.stash[fault_handler_stderr_fd_key]
    except (ImportError, KeyError):
        return sys.__stderr__


@pytest.fixture(autouse=True)
def _hard_time_limit(request):
    limit = _limit(request.node)
    if limit:
        faulthandler.dump_traceback_later(limit + GRACE_S, exit=True, file=_terminal_stderr(request.config))
    yield
    faulthandler.cancel_dump_traceback_later()
