"""bench/precision.py's hunk splitter, keys, rule attribution and label lookup, on a
synthetic diff (no network, no npu-migrate run)."""

import json
from collections import Counter

import pytest

from bench import precision
from bench.precision import (
    Hunk,
    attribute_rules,
    hunk_key,
    load_labels,
    lookup,
    split_diff,
)

pytestmark = pytest.mark.timeout(30)

DIFF = """\
--- a/pkg/train.py
+++ b/pkg/train.py
@@ -1,10 +1,11 @@
 import torch
+import torch_npu  # noqa: F401
 
 
 def step(x):
-    x = x.cuda()
+    x = x.npu()
     y = 1
     z = 2
     w = 3
-    torch.cuda.synchronize()
+    torch.npu.synchronize()
     return x
pkg/train.py:20:5: NPU999 a finding line that is not part of the diff
--- a/conf/run.yaml
+++ b/conf/run.yaml
@@ -4 +4 @@
-device: cuda
+device: npu
"""

REPORT = {"files": [
    {"path": "pkg/train.py", "fixes": [
        {"rule": "NPU100", "start": {"line": 1}, "end": {"line": 1}},
        {"rule": "NPU103", "start": {"line": 5}, "end": {"line": 5}},
        {"rule": "NPU101", "start": {"line": 9}, "end": {"line": 9}},
    ]},
    {"path": "./conf/run.yaml", "fixes": [{"rule": "NPU940", "start": {"line": 4}, "end": {"line": 4}}]},
]}


def test_split_diff_gives_one_hunk_per_run_of_changed_lines():
    hunks = split_diff(DIFF)
    assert [(h.file, h.old_start, h.removed, h.added) for h in hunks] == [
        ("pkg/train.py", 2, [], ["import torch_npu  # noqa: F401"]),
        ("pkg/train.py", 5, ["    x = x.cuda()"], ["    x = x.npu()"]),
        ("pkg/train.py", 9, ["    torch.cuda.synchronize()"], ["    torch.npu.synchronize()"]),
        ("conf/run.yaml", 4, ["device: cuda"], ["device: npu"]),
    ]
    # context is kept for the reviewer, at most three lines each side
    assert hunks[1].before == ["", "", "def step(x):"]
    assert hunks[1].after == ["    y = 1", "    z = 2", "    w = 3"]
    assert hunks[2].after == ["    return x"]


def test_key_ignores_positions_but_not_path_or_content():
    moved = DIFF.replace("@@ -1,10 +1,11 @@", "@@ -40,10 +40,11 @@")
    assert [h.key for h in split_diff(moved)] == [h.key for h in split_diff(DIFF)]
    base = hunk_key("a.py", ["x.cuda()"], ["x.npu()"])
    assert base != hunk_key("b.py", ["x.cuda()"], ["x.npu()"])
    assert base != hunk_key("a.py", ["x.cuda()"], ["x.to('npu')"])
    # a removed line is not the same as an added one with the same text
    assert hunk_key("a.py", ["x"], []) != hunk_key("a.py", [], ["x"])


def test_rules_come_from_the_fixes_on_the_hunks_lines():
    hunks = split_diff(DIFF)
    attribute_rules(hunks, REPORT)
    assert [h.rules for h in hunks] == [["NPU100"], ["NPU103"], ["NPU101"], ["NPU940"]]
    lonely = [Hunk("other.py", 3, ["a"], ["b"])]
    attribute_rules(lonely, REPORT)
    assert lonely[0].rules == ["?"]


def test_labels_are_looked_up_by_repo_file_and_key(tmp_path):
    hunks = split_diff(DIFF)
    for hunk in hunks:
        hunk.repo = "demo"
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in [
        {"repo": "demo", "version": "1", "file": "pkg/train.py", "key": hunks[1].key, "label": "correct",
         "rules": ["NPU103"], "reason": "tensor moved to the device"},
        {"repo": "other", "version": "1", "file": "pkg/train.py", "key": hunks[2].key, "label": "wrong",
         "rules": ["NPU101"], "reason": "another repository's label"},
    ]) + "\n\n")
    labels = load_labels(path)
    assert lookup(labels, hunks[1])["label"] == "correct"
    assert lookup(labels, hunks[2]) is None  # same key, other repository
    assert lookup(labels, hunks[0]) is None


def test_a_bad_label_line_names_file_and_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"repo": "r", "file": "f", "key": "k", "label": "correct"}\n'
                    '{"repo": "r", "file": "f", "key": "k2", "label": "fine"}\n')
    with pytest.raises(SystemExit, match=r"labels.jsonl:2: .*'fine'"):
        load_labels(path)


def test_tally_splits_tuning_and_held_out_and_counts_each_rule():
    tuned = precision.PrecisionProject("a", "1", "vision", "a-1.tar.gz", "0" * 64, "tuned here")
    fresh = precision.PrecisionProject("b", "1", "rlhf", "b-1.tar.gz", "0" * 64)
    h1 = Hunk("x.py", 1, ["a"], ["b"], rules=["NPU101", "NPU103"])
    h2 = Hunk("x.py", 2, ["c"], ["d"], rules=["NPU101"])
    counts = precision.tally([(tuned, h1, "correct"), (fresh, h2, "wrong"), (fresh, h1, "unlabelled")])
    assert counts["all"] == Counter(hunks=3, correct=1, wrong=1, unlabelled=1)
    assert counts["tuning"] == Counter(hunks=1, correct=1)
    assert counts["held-out"] == Counter(hunks=2, wrong=1, unlabelled=1)
    assert counts["rule:NPU101"]["hunks"] == 3 and counts["rule:NPU103"]["hunks"] == 2
    assert counts["rule:NPU101:held-out"]["wrong"] == 1


def test_the_kept_labels_file_is_well_formed():
    labels = load_labels()
    names = {p.name for p in precision.PROJECTS}
    for (repo, _file, key), entry in labels.items():
        assert repo in names, repo
        assert len(key) == 16 and entry["reason"], entry


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smoke_one_real_repository(tmp_path, monkeypatch, capsys):
    """The whole run on one small pinned wheel (open_clip_torch): download (sha256
    checked), npu-migrate, split, lookup, tables. Needs PyPI; CI has it."""
    monkeypatch.delenv("NPU_MIGRATE_CMD", raising=False)
    dump = tmp_path / "run.json"
    rc = precision.main(["--projects", "open_clip_torch", "--strict", "--jobs", "1", "--json", str(dump)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "| open_clip_torch-3.3.0 | vision | held-out |" in out
    hunks = json.loads(dump.read_text())
    assert hunks and all(len(h["key"]) == 16 and h["rules"] for h in hunks)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_project_that_already_supports_the_npu_gets_no_hunk(tmp_path, monkeypatch, capsys):
    """sentence-transformers 6.2 branches on is_torch_npu_available() itself: every
    CUDA line sits in a chain that already handles the NPU (NPU010), nothing is rewritten."""
    monkeypatch.delenv("NPU_MIGRATE_CMD", raising=False)
    dump = tmp_path / "run.json"
    rc = precision.main(["--projects", "sentence-transformers", "--jobs", "1", "--json", str(dump)])
    capsys.readouterr()
    assert rc == 0
    assert json.loads(dump.read_text()) == []


def test_an_insertion_away_from_its_fix_goes_to_the_fix_that_quotes_it():
    report = {"files": [{"path": "m.py", "fixes": [
        {"rule": "NPU100", "message": "added `import torch_npu`, which registers the npu device",
         "start": {"line": 1}, "end": {"line": 1}},
        {"rule": "NPU101", "message": "`torch.cuda.x` -> `torch.npu.x`", "start": {"line": 30}, "end": {"line": 30}},
    ]}]}
    hunk = Hunk("m.py", 29, [], ["try:", "    import torch_npu  # noqa: F401", "except ImportError:", "    pass"])
    attribute_rules([hunk], report)
    assert hunk.rules == ["NPU100"]


def test_a_recount_from_json_keeps_every_hunk_of_a_sampled_repository(tmp_path, capsys):
    """A dump holds only the hunks its run counted (the sample, and labelled hunks outside
    it): a recount must count each of them, not draw the sample again from that subset
    (round 9: megatron-core's 69 unlabelled hunks recounted as 25)."""
    seed, size = precision.SAMPLES["torchrl"]
    entries = [{"repo": "torchrl", "version": "0", "file": f"f{i}.py", "line": 1, "key": f"{i:016x}",
                "removed": [f"x{i} = 'cuda'"], "added": [f"x{i} = 'npu'"], "rules": ["NPU104"], "label": None}
               for i in range(size + 40)]
    dump = tmp_path / "run.json"
    dump.write_text(json.dumps(entries))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("")
    template = tmp_path / "stubs.jsonl"
    precision.main(["--from-json", str(dump), "--labels", str(labels), "--projects", "torchrl",
                    "--template", str(template)])
    capsys.readouterr()
    assert len(template.read_text().splitlines()) == size + 40
