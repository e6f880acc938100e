"""Issue 28: a re-run that the cache answers does no per-file work beyond reading,
digesting and verifying; its report needs neither the rules nor libcst, because each
result carries the summary and impact of its rules (``FileResult.rule_notes``), which
the cache keeps under the entry's HMAC like the rest of the result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest

CUDA = b"import torch\nx = torch.zeros(2).cuda()\nn = torch.cuda.device_count()\nimport apex\n"

_WARM = """
import contextlib, io, sys
from npu_migrate.cli import main
sys.argv = ["npu-migrate", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
loaded = sorted(m for m in sys.modules if m == "libcst" or m.startswith(("libcst.", "npu_migrate.rules.")))
print(json.dumps(loaded))
"""


def test_rule_notes_survive_the_cache_and_a_bad_shape_is_recomputed(tmp_path):
    from npu_migrate.pipeline import cache
    from npu_migrate.pipeline.model import FileResult, Finding

    store = cache.Cache(tmp_path / "c", "settings", home=tmp_path / "home" / "npu-migrate")
    key = store.key("a.py", "digest")
    result = FileResult(path="a.py", findings=[Finding(1, 0, "NPU903", "m", "s")],
                        rule_notes={"NPU903": ("apex does not run on Ascend", "blocking")})
    store.put(key, result)
    store.flush()
    assert store.get("a.py", key).rule_notes == {"NPU903": ("apex does not run on Ascend", "blocking")}
    data = result.to_cache()
    data["rules"] = {"NPU903": ["only one"]}
    payload = zlib.compress(json.dumps(data).encode())
    store._entry(key).write_bytes(cache._MAGIC + store._mac(key, payload) + payload)
    assert store.get("a.py", key) is None


def test_the_worker_notes_the_rules_of_its_results():
    from npu_migrate.pipeline.registry import all_rules
    from npu_migrate.pipeline.runner import migrate_safely
    from npu_migrate.pipeline.settings import Settings

    result = migrate_safely("t.py", CUDA, Settings())
    used = {item.rule for item in (*result.fixes, *result.findings)}
    assert result.fixes and result.findings
    rules = all_rules()
    assert result.rule_notes == {rule: (rules[rule].summary, rules[rule].impact) for rule in used}


@pytest.mark.timeout(300)
def test_a_cached_rerun_reports_the_same_without_loading_rules_or_libcst(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_bytes(CUDA)
    (project / "pyproject.toml").write_bytes(b"[tool.npu-migrate]\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    reports = []
    for run in ("cold", "warm"):
        report = tmp_path / f"{run}.json"
        done = subprocess.run([sys.executable, "-c", "import json\n" + _WARM, "train.py", "--report", str(report),
                               "--cache-dir", str(tmp_path / "cache")],
                              cwd=project, env=env, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        loaded = json.loads(done.stdout.strip().splitlines()[-1])
        reports.append(json.loads(report.read_text()))
        # Not in the cold run's parent either: the workers (a process per pool) load them.
        assert loaded == [], run
    assert list((tmp_path / "cache").rglob("*.bin"))  # the warm run had entries to answer from
    for report in reports:
        report["summary"].pop("elapsed", None)
    assert reports[0] == reports[1]
    findings = reports[1]["files"][0]["findings"]
    assert findings and all(f["impact"] in ("blocking", "review", "informational") for f in findings)
    assert all(f["reason"] for f in reports[1]["files"][0]["fixes"])
