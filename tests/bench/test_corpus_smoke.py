"""CI smoke run of the benchmark audits on one real library (accelerate, pinned).

Downloads the accelerate wheel from PyPI into the corpus cache
($NPU_MIGRATE_CORPUS_CACHE or ~/.cache/npu-migrate/corpus, reused across runs),
then runs the coverage audit (with its second pass over the migrated output) and
the prefilter proof (on the original and on the migrated tree) with the real
npu-migrate.
A failed download fails the test: CI has PyPI, so no network is a real error.
"""

import pytest

from bench import coverage, prefilter_proof
from bench.corpus import PROJECTS, ensure_corpus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def accelerate():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("NPU_MIGRATE_CMD", raising=False)  # the real tool, not a stand-in
        projects = ensure_corpus({"accelerate": PROJECTS["accelerate"]}, strict=True)
        assert [p.name for p in projects] == ["accelerate"] and projects[0].files > 50
        yield projects


@pytest.fixture(scope="module")
def audit(accelerate):
    return coverage.audit(accelerate, log=print)


def test_the_audit_saw_real_work(audit):
    # guards against a vacuous pass (tool not run, nothing scanned)
    assert audit.files > 50
    assert sum(audit.before.values()) > 50
    assert audit.changed > 0 and sum(audit.fixes.values()) > 0
    assert audit.write_exit == 0 and audit.tool_errors == []
    assert audit.unlisted == []  # every corpus file went through the tool


def test_every_output_parses(audit):
    assert audit.parse_failures == []


def test_a_second_run_changes_nothing(audit):
    assert audit.idempotency_failures == []
    assert audit.check_exit == 0


def test_no_silent_leftovers(audit):
    silent = [f"{x.path}:{x.line}: [{x.pattern}] {x.text}" for x in audit.silent]
    assert silent == [], f"{len(silent)} silent CUDA leftovers:\n" + "\n".join(silent)


def test_a_run_over_the_output_reports_the_same(audit):
    """The second pass: nothing left for manual work disappears from the report once
    the tree is migrated."""
    lost = [f"{x.path}:{x.line}: [{x.pattern}] {x.text}" for x in audit.lost]
    assert lost == [], "reported leftovers the second run lost:\n" + "\n".join(lost)
    assert audit.lost_findings == []
    assert sum(audit.findings_again.values()) >= sum(audit.findings.values()) > 0


@pytest.mark.parametrize("migrated", [False, True], ids=["original", "migrated"])
def test_prefilter_reports_are_identical(accelerate, migrated):
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("NPU_MIGRATE_CMD", raising=False)
        proof = prefilter_proof.prove(accelerate, log=print, migrated=migrated)
    assert proof.busy_full > 0
    assert proof.ok(), prefilter_proof.render(proof)


def test_signals_during_write_lose_nothing(accelerate, tmp_path, monkeypatch):
    """bench/faults.py on accelerate, one run of each kind (Ctrl-C and SIGKILL, while
    migrating and while writing): whole files, no lost edit, no hang, clean recovery."""
    from bench import faults

    monkeypatch.delenv("NPU_MIGRATE_CMD", raising=False)
    output = tmp_path / "faults.md"
    assert faults.main(["--projects", "accelerate", "--runs", "4", "--output", str(output)]) == 0
    text = output.read_text()
    assert "- partial or mixed files: 0" in text and "- hangs: 0; workers outliving their parent: 0" in text
    assert "exit 130 in 2 of 2" in text and "the written count exact in 2 of 2" in text
