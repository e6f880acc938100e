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
