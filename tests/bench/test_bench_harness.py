"""The audit, the prefilter proof and the throughput harness, driven by a stub tool with known answers."""

import sys
from pathlib import Path

import pytest

from bench import coverage, prefilter_proof, throughput
from bench._common import measure
from bench.corpus import Project

STUB = Path(__file__).with_name("stub_migrate.py")

FILES = {
    # the stub fixes torch.cuda. and .cuda(, reports "nccl", and is silent about 'cuda' strings
    "a.py": "import torch\n\nx = torch.cuda.device_count()\ny = model.cuda()\n",
    "b.py": "import torch.distributed as dist\n# 'cuda' in a comment\n"
            "dist.init_process_group(backend=\"nccl\")\ndev = torch.device('cuda')\n",
    "pkg/c.py": '"""Docs about cuda and nccl."""\nVALUE = 1\n',
}


@pytest.fixture
def fake_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("NPU_MIGRATE_CMD", f"{sys.executable} {STUB}")
    for var in ("STUB_NOT_IDEMPOTENT", "STUB_BREAK_SYNTAX", "STUB_BROKEN_PREFILTER"):
        monkeypatch.delenv(var, raising=False)
    root = tmp_path / "src" / "fake-1.0"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return [Project("fake", "1.0", root, "fake-1.0-py3-none-any.whl", 1, len(FILES), 0)]


def test_audit_classifies_fixed_reported_and_silent(fake_corpus):
    a = coverage.audit(fake_corpus, log=lambda m: None)
    assert a.files == 3 and a.changed == 1
    assert a.before[("fake", "torch.cuda")] == 1 and a.before[("fake", ".cuda()")] == 1
    by_status = {(x.path, x.line, x.pattern, x.status) for x in a.leftovers}
    assert by_status == {
        ("fake-1.0/b.py", 3, "nccl backend", "reported-line"),
        ("fake-1.0/b.py", 4, "'cuda' device string", "silent"),
    }
    assert [x.path for x in a.silent] == ["fake-1.0/b.py"]
    assert a.fixes == {"NPU101": 1, "NPU110": 1} and a.findings == {"NPU900": 1}
    assert not a.parse_failures and not a.idempotency_failures and a.check_exit == 0
    assert a.unlisted == [] and a.tool_errors == []
    assert not a.ok()  # one silent leftover
    text = coverage.render(a, fake_corpus, 1)
    assert "`fake-1.0/b.py:4` [4] 'cuda' device string: `dev = torch.device('cuda')`" in text
    # the cache copy is never written
    assert (fake_corpus[0].root / "a.py").read_text() == FILES["a.py"]


def test_audit_maps_output_lines_back_through_inserted_lines(fake_corpus, tmp_path):
    # a leftover below a line the tool added must still be matched to its original line
    (fake_corpus[0].root / "b.py").write_text("x = torch.cuda.device_count()\ndist.init_process_group(backend=\"nccl\")\n")
    a = coverage.audit(fake_corpus, log=lambda m: None)
    assert [(x.line, x.orig_lines, x.status) for x in a.leftovers] == [(2, (2, 3), "reported-line")]


def test_audit_catches_non_idempotent_output(fake_corpus, monkeypatch):
    monkeypatch.setenv("STUB_NOT_IDEMPOTENT", "1")
    a = coverage.audit(fake_corpus, log=lambda m: None)
    assert a.check_exit == 1
    # a.py no longer mentions cuda after the first run, so the stub passes over it
    assert a.idempotency_failures == ["fake-1.0/b.py", "fake-1.0/pkg/c.py"]
    assert not a.ok()


def test_audit_catches_unparsable_output(fake_corpus, monkeypatch):
    monkeypatch.setenv("STUB_BREAK_SYNTAX", "1")
    a = coverage.audit(fake_corpus, log=lambda m: None)
    assert [path for path, _ in a.parse_failures] == ["fake-1.0/a.py"]


def test_prefilter_proof_passes_for_identical_reports(fake_corpus):
    proof = prefilter_proof.prove(fake_corpus, log=lambda m: None)
    assert proof.ok() and proof.files == 3 and proof.busy_full == 2


def test_prefilter_proof_fails_when_the_prefilter_skips_a_finding(fake_corpus, monkeypatch):
    monkeypatch.setenv("STUB_BROKEN_PREFILTER", "1")  # stub's prefilter no longer looks for "nccl"
    (fake_corpus[0].root / "b.py").write_text('dist.init_process_group(backend="nccl")\n')
    proof = prefilter_proof.prove(fake_corpus, log=lambda m: None)
    assert proof.missed == ["fake-1.0/b.py"] and not proof.ok()
    assert "MISSED: fake-1.0/b.py" in prefilter_proof.render(proof)


def test_prefilter_compare_tells_differences_apart():
    quiet = {"changed": False, "error": None, "fixes": [], "findings": []}
    busy = {"changed": True, "error": None, "fixes": [{"rule": "NPU101", "start": {"line": 1, "column": 1}, "message": "m"}],
            "findings": []}
    other = dict(busy, fixes=[{"rule": "NPU101", "start": {"line": 2, "column": 1}, "message": "m"}])
    proof = prefilter_proof.compare({"q": quiet, "b": busy, "d": busy, "e": busy},
                                    {"q": quiet, "b": busy, "d": other, "m": busy}, prefilter_proof.Proof())
    assert (proof.missed, proof.differ, proof.extra) == (["m"], ["d"], ["e"])


def test_throughput_rows_and_markdown(fake_corpus, tmp_path):
    rows, meta = throughput.run(fake_corpus, sample=1, repeat_single=1, skip={"ruff"}, log=lambda m: None)
    names = [r.name for r in rows]
    assert names[0].startswith("libcst parse+codegen (floor)")
    assert any("--jobs 1" in n for n in names) and any("--jobs 2" in n for n in names)
    assert any("warm re-run" in n for n in names) and any("one file" in n for n in names)
    assert meta == {"files": 3, "lines": 10, "single_file": "fake-1.0/a.py"}
    assert all(r.seconds > 0 for r in rows)
    assert all(r.files == 3 for r in rows if "jobs" in r.name)
    text = throughput.render(rows, meta, fake_corpus, 1)
    assert text.count("\n| ") == len(rows) + 1
    assert "1.000x" in text and "Goals:" in text and "warm re-run:" in text

    # ... and the same table goes into the README's block, replacing what was there
    block = throughput.readme_block(text)
    assert block.startswith("Corpus:") and block.count("\n| ") == len(rows) + 1 and "- --jobs 1:" in block
    readme = f"# x\n\n{throughput.README_START}\nold table\n{throughput.README_END}\n\nafter\n"
    updated = throughput.update_readme(readme, block)
    assert "old table" not in updated and block in updated and updated.endswith("\nafter\n")
    assert throughput.update_readme(updated, block) == updated
    with pytest.raises(ValueError):
        throughput.update_readme("# no block\n", block)


def test_measure_reports_wall_time_and_peak_rss_of_the_child():
    m = measure([sys.executable, "-c", "import time; b = bytearray(150 * 2**20); time.sleep(0.2); print('ok')"])
    assert m.returncode == 0 and m.stdout.strip() == "ok"
    assert m.seconds >= 0.2
    assert 150 <= m.rss_mb < 400


def test_only_counterparts_present_in_the_original_make_a_leftover_generic(fake_corpus):
    # g.py: device-generic code the tool leaves alone; h.py: the tool itself writes "npu:0"
    # beside a "cuda" it leaves: that one must stay silent
    (fake_corpus[0].root / "g.py").write_text('DEVICES = ("cuda", "npu")\n')
    (fake_corpus[0].root / "h.py").write_text('pair = ("cuda:0", "cuda")\n')
    a = coverage.audit(fake_corpus, log=lambda m: None)
    status = {(x.path, x.pattern): x.status for x in a.leftovers if x.path.endswith(("g.py", "h.py"))}
    assert status == {("fake-1.0/g.py", "'cuda' device string"): "generic",
                      ("fake-1.0/h.py", "'cuda' device string"): "silent"}


def test_prefilter_compare_catches_different_diffs_with_equal_reports():
    busy = {"changed": True, "error": None, "fixes": [{"rule": "NPU101", "start": {"line": 1, "column": 1}, "message": "m"}],
            "findings": []}
    diffs_a = prefilter_proof.split_diffs("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n--- a/y.py\n+++ b/y.py\n")
    diffs_b = dict(diffs_a, **{"x.py": diffs_a["x.py"].replace("+b", "+c")})
    assert set(diffs_a) == {"x.py", "y.py"}
    proof = prefilter_proof.compare({"x.py": busy}, {"x.py": busy}, prefilter_proof.Proof(), (diffs_a, diffs_b))
    assert proof.differ == ["x.py"] and "the diffs differ" in proof.details["x.py"]
    same = prefilter_proof.compare({"x.py": busy}, {"x.py": busy}, prefilter_proof.Proof(), (diffs_a, dict(diffs_a)))
    assert not same.differ and not same.details
