"""verify's scheduling (npu_migrate/verify/command.py ``_both``): with ``--jobs 2`` the
migrated copy is migrated while the reference twin already runs (fast: no processes)."""

from __future__ import annotations

import threading

import pytest

from npu_migrate.verify import command


@pytest.mark.timeout(30)
def test_the_second_copys_migration_overlaps_the_first_run():
    started, migrated, order = threading.Event(), threading.Event(), []

    def first():
        started.set()
        assert migrated.wait(10)  # the migration ran while this run was under way
        order.append("first")
        return "reference"

    def before_second():
        assert started.wait(10)
        order.append("migrated")
        migrated.set()

    req = command.Request(script="train.py", jobs=2)
    assert command._both(req, first, lambda: "migrated twin", before_second=before_second) == [
        "reference", "migrated twin"]
    assert order == ["migrated", "first"]


@pytest.mark.timeout(30)
def test_one_job_migrates_first_and_a_failed_migration_starts_no_second_run(monkeypatch):
    calls = []
    req = command.Request(script="train.py", jobs=1)
    assert command._both(req, lambda: calls.append("first") or 1, lambda: calls.append("second") or 2,
                         before_second=lambda: calls.append("migrate")) == [1, 2]
    assert calls == ["migrate", "first", "second"]

    killed = []
    monkeypatch.setattr(command.twins, "kill_running", lambda: killed.append(True))

    def fail():
        raise command.VerifyError("the migration of the copy failed: x")

    calls.clear()
    with pytest.raises(command.VerifyError):
        command._both(command.Request(script="train.py", jobs=2), lambda: calls.append("first"),
                      lambda: calls.append("second"), before_second=fail)
    assert "second" not in calls and killed == [True]  # the reference run under way is ended


MIGRATE_TWICE = """
import json, multiprocessing, sys
from pathlib import Path
from npu_migrate.verify import twins

assert multiprocessing.get_start_method() == "fork"
options = twins.migrated_options(None, [], None, [], None)
before = {name for name in sys.modules if name.startswith("npu_migrate.rules.") or name == "libcst"}
twins.migrate_copy(Path(sys.argv[1]), options)
loaded = sorted(name for name in sys.modules if name.startswith("npu_migrate.rules.") or name == "libcst")
twins.migrate_copy(Path(sys.argv[2]), options)
print(json.dumps({"before": sorted(before), "loaded": loaded}))
"""


@pytest.mark.timeout(180)
def test_verify_loads_the_rules_once_and_its_copies_migrate_as_the_cli_does(tmp_path):
    """The workers of each copy's migration are forked with the rules already imported in
    verify's process (npu_migrate/pipeline/runner.py ``preload``), not importing libcst and
    the rules per pass; the copies come out byte-identical to the command line's migration."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "cuda_project"
    copies = [shutil.copytree(example, tmp_path / name) for name in ("a", "b", "cli")]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", MIGRATE_TWICE, str(copies[0]), str(copies[1])], env=env,
                          capture_output=True, text=True, timeout=170, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["before"] == [] and "libcst" in seen["loaded"], seen  # loaded here, once
    assert any(name.startswith("npu_migrate.rules.") for name in seen["loaded"]), seen
    cli = subprocess.run([sys.executable, "-m", "npu_migrate", "--write", "--no-diff", "--quiet", "--no-cache", "."], cwd=copies[2], env=env,
                         capture_output=True, text=True, timeout=170, check=False)
    assert cli.returncode in (0, 1), cli.stderr
    assert (copies[2] / "train.py").read_bytes() != (example / "train.py").read_bytes()  # it did migrate
    for copy in copies[:2]:
        files = sorted(p.relative_to(copy) for p in Path(copy).rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(copies[2]) for p in Path(copies[2]).rglob("*") if p.is_file())
        for rel in files:
            assert (Path(copy) / rel).read_bytes() == (Path(copies[2]) / rel).read_bytes(), rel


@pytest.mark.timeout(30)
def test_a_front_end_that_fails_to_preload_skips_only_itself(monkeypatch):
    """``runner.preload`` warms each file type on its own: one whose import fails (a
    missing optional library) is left to the workers, the others are still loaded."""
    from npu_migrate.pipeline import filetypes, runner

    warmed, failing = [], filetypes.FILE_TYPES[0].name

    def warm(names):
        if failing in names:
            raise ImportError("no such library")
        warmed.extend(names)

    monkeypatch.setattr(runner, "_preloaded", False)
    monkeypatch.setattr(runner, "_warm", warm)
    monkeypatch.setattr(runner.multiprocessing, "get_start_method", lambda: "fork")
    runner.preload()
    runner.preload()  # once per process
    assert warmed == [file_type.name for file_type in filetypes.FILE_TYPES[1:]]
