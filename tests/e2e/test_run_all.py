"""The e2e harness repeats a run that aborted at interpreter exit once, and only once."""

from __future__ import annotations

import sys

from .conftest import EXIT_ABORT, run_all

FLAKY = (
    "import os, sys, pathlib\n"
    "marker = pathlib.Path(sys.argv[1])\n"
    "if not marker.exists() or sys.argv[2] == 'always':\n"
    "    marker.touch()\n"
    f"    print({EXIT_ABORT!r}, flush=True)\n"
    "    os.abort()\n"
    "print('trained')\n"
)


def test_an_exit_abort_is_repeated_once(tmp_path):
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    once, always, failing = run_all(
        [sys.executable, str(script), str(tmp_path / "m1"), "once"],
        [sys.executable, str(script), str(tmp_path / "m2"), "always"],
        [sys.executable, "-c", "raise SystemExit(3)"],
        cwd=tmp_path,
    )
    assert once.returncode == 0 and "trained" in once.output and "repeated once" in once.output
    assert always.returncode != 0 and EXIT_ABORT in always.output  # a second abort is a failure
    assert failing.returncode == 3 and "repeated" not in failing.output  # other failures are not repeated
