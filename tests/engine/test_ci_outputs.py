"""Review and CI output as ruff users expect it (issue 27): machine formats and -o keep
the diff off stdout, --diff never writes, a closed pipe is said on stderr, -q keeps
the findings and -s prints nothing, --isolated, --color, SARIF fingerprints and fixes."""

from __future__ import annotations

import json
import subprocess

import pytest

from .test_cli_conventions import CONSOLE_SCRIPT, cli

TRAIN = b"import torch\nn = torch.cuda.device_count()\ntorch.cuda.nvtx.range_push('a')\n"
OTHER = b"import torch\nx = torch.zeros(2).cuda()\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_bytes(TRAIN)
    (tmp_path / "other.py").write_bytes(OTHER)
    return tmp_path


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "gitlab", "text"])
def test_output_file_keeps_stdout_free_of_the_diff(project, fmt):
    done = cli(project, ".", "--no-cache", "--output-format", fmt, "-o", "out.report", "--exit-zero")
    assert done.returncode == 0
    assert done.stdout == b""
    assert b"file(s) scanned" in done.stderr  # the summary goes to stderr
    assert (project / "out.report").stat().st_size > 0


def test_machine_format_on_stdout_carries_only_the_report(project):
    done = cli(project, ".", "--no-cache", "--output-format", "json")
    assert json.loads(done.stdout)["summary"]["fixes"] > 0  # nothing else mixed in


def test_diff_never_writes(project):
    done = cli(project, ".", "--no-cache", "--write", "--diff")
    assert done.returncode == 2 and b"--diff" in done.stderr and b"never writes" in done.stderr
    assert (project / "train.py").read_bytes() == TRAIN and (project / "other.py").read_bytes() == OTHER


@pytest.mark.timeout(120)
def test_a_closed_pipe_is_said_on_stderr_and_nothing_is_written(project):
    for name in range(30):  # enough diff to overflow a pipe nobody reads
        (project / f"m{name}.py").write_bytes(TRAIN * 40)
    proc = subprocess.Popen([str(CONSOLE_SCRIPT), ".", "--no-cache", "--diff", "--jobs", "1"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(100)
    proc.stdout.close()  # as `| head -c 100` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=100) == 2
    assert "standard output was closed" in err and "0 file(s) written" in err
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert (project / "train.py").read_bytes() == TRAIN


def test_quiet_keeps_the_findings_and_silent_prints_nothing(project):
    quiet = cli(project, ".", "--no-cache", "-q")
    assert b"train.py:3:1: NPU102" in quiet.stderr
    assert b"file(s) scanned" not in quiet.stderr and b"--- a/" not in quiet.stdout
    silent = cli(project, ".", "--no-cache", "-s", "--check")
    assert silent.returncode == 1 and silent.stdout == b"" and silent.stderr == b""


def test_isolated_ignores_the_configuration(project):
    (project / "pyproject.toml").write_text('[tool.npu-migrate]\nignore = ["NPU102"]\n')
    configured = cli(project, ".", "--no-cache", "-q").stderr
    isolated = cli(project, ".", "--no-cache", "-q", "--isolated").stderr
    assert b"NPU102" not in configured and b"NPU102" in isolated
    both = cli(project, ".", "--isolated", "--config", "pyproject.toml")
    assert both.returncode == 2 and b"--isolated" in both.stderr


def test_color_always_and_never(project):
    always = cli(project, "train.py", "--no-cache", "--color", "always")
    assert b"\x1b[" in always.stdout + always.stderr
    never = cli(project, "train.py", "--no-cache", "--color", "never")
    assert b"\x1b[" not in never.stdout + never.stderr


def test_sarif_results_have_fingerprints_and_fixes_that_reproduce_the_migration(project):
    cli(project, ".", "--no-cache", "--output-format", "sarif", "-o", "r.sarif", "--exit-zero")
    run = json.loads((project / "r.sarif").read_text())["runs"][0]
    prints = [r["partialFingerprints"]["npuMigrateLineHash/v1"] for r in run["results"]]
    assert len(set(prints)) == len(prints)
    fixes = [r for r in run["results"] if r["properties"]["kind"] == "fix"]
    assert fixes and all("fixes" in r for r in fixes)
    # Applying each file's distinct replacements gives the file --write writes.
    expected = {}
    for name in ("train.py", "other.py"):
        expected[name] = subprocess.run([str(CONSOLE_SCRIPT), "-", "--stdin-filename", name, "--no-cache"],
                                        input=(project / name).read_bytes(), capture_output=True, cwd=project,
                                        check=False).stdout
    for name, original in (("train.py", TRAIN), ("other.py", OTHER)):
        text = original.decode()
        replacements = {json.dumps(rep, sort_keys=True)
                        for r in fixes for fix in r["fixes"] for change in fix["artifactChanges"]
                        if change["artifactLocation"]["uri"] == name for rep in change["replacements"]}
        for rep in sorted((json.loads(x) for x in replacements), key=lambda x: -x["deletedRegion"]["charOffset"]):
            start = rep["deletedRegion"]["charOffset"]
            text = text[:start] + rep["insertedContent"]["text"] + text[start + rep["deletedRegion"]["charLength"]:]
        assert text.encode() == expected[name]


def test_sarif_fingerprints_survive_lines_moving_down(project):
    cli(project, ".", "--no-cache", "--output-format", "sarif", "-o", "a.sarif", "--exit-zero")
    (project / "train.py").write_bytes(b"# a new comment\n" + TRAIN)
    cli(project, ".", "--no-cache", "--output-format", "sarif", "-o", "b.sarif", "--exit-zero")

    def prints(name):
        run = json.loads((project / name).read_text())["runs"][0]
        return {r["partialFingerprints"]["npuMigrateLineHash/v1"] for r in run["results"]}

    assert prints("a.sarif") == prints("b.sarif")


def test_rules_by_prefix_name_and_as_json(tmp_path):
    prefix = cli(tmp_path, "rules", "NPU3").stdout.decode().splitlines()
    assert prefix and all(line.startswith("NPU3") for line in prefix)
    by_name = cli(tmp_path, "rules", "torch-cuda-amp").stdout.decode()
    assert by_name.startswith("# NPU301 (torch-cuda-amp)")
    as_json = json.loads(cli(tmp_path, "rules", "--output-format", "json").stdout)
    assert {"NPU101", "NPU301"} <= {r["id"] for r in as_json}
    assert all({"id", "name", "summary", "fixable", "documentation"} <= set(r) for r in as_json)
    missing = cli(tmp_path, "rules", "no-such-rule")
    assert missing.returncode == 2 and b"no rule matches" in missing.stderr


def test_help_has_examples_and_exit_codes(tmp_path):
    text = cli(tmp_path, "--help").stdout.decode()
    assert "Examples:" in text and "Exit codes:" in text and "--check" in text
    assert "npu-migrate diagnose LOG" in text


def test_markdown_readiness_summary(project):
    (project / "sub").mkdir()
    (project / "sub" / "fused.py").write_bytes(b"import apex\nopt = apex.optimizers.FusedAdam([])\n")
    done = cli(project, ".", "--no-cache", "--output-format", "markdown")
    md = done.stdout.decode()
    assert md.startswith("## npu-migrate: readiness for Ascend NPU")
    assert "**Not ready**" in md and "--- a/" not in md
    blocking = md.split("### Blocking")[1].split("###")[0]
    assert "NPU903" in blocking and "`sub/fused.py:" in blocking  # apex blocks training
    assert "NPU102" in blocking  # a CUDA API with no NPU counterpart
    assert "| References converted automatically (fixes) |" in md and "| Lines changed" in md
    assert "### By directory" in md and "| `sub` |" in md
    assert "### What to install on the training image" in md


def test_impact_class_in_json_sarif_and_github(project):
    report = json.loads(cli(project, ".", "--no-cache", "--output-format", "json").stdout)
    finding = report["files"][[f["path"] for f in report["files"]].index("train.py")]["findings"][0]
    assert finding["rule"] == "NPU102" and finding["impact"] == "blocking"
    assert report["summary"]["findings_by_impact"]["blocking"] >= 1
    cli(project, ".", "--no-cache", "--output-format", "sarif", "-o", "r.sarif", "--exit-zero")
    run = json.loads((project / "r.sarif").read_text())["runs"][0]
    result = next(r for r in run["results"] if r["ruleId"] == "NPU102")
    assert result["level"] == "error" and result["properties"]["impact"] == "blocking"
    github = cli(project, ".", "--no-cache", "--output-format", "github").stdout.decode()
    assert any(line.startswith("::error ") and "title=NPU102" in line for line in github.splitlines())


def test_every_rule_declares_a_known_impact(tmp_path):
    rules = json.loads(cli(tmp_path, "rules", "--output-format", "json").stdout)
    impacts = {r["id"]: r["documentation"].split("Impact of a finding: ")[1].split()[0] for r in rules}
    assert set(impacts.values()) <= {"blocking", "review", "informational"}
    assert impacts["NPU010"] == "informational" and impacts["NPU903"] == "blocking"
