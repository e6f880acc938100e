"""The command line as users run it: dry run, --write, --check, --report, config,
selection, discovery, suppression, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

#: The console script installed next to the interpreter running the tests (a venv's bin/).
CONSOLE_SCRIPT = Path(sys.executable).parent / "npu-migrate"

CUDA = b"import torch\nn = torch.cuda.device_count()\n"
CPU = b"import torch\nx = torch.zeros(2)\n"


def write(root: Path, rel: str, data: bytes | str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else textwrap.dedent(data).encode())
    return path


def test_dry_run_prints_diff_and_changes_nothing(tmp_path, run_cli):
    script = write(tmp_path, "train.py", CUDA)
    result = run_cli(".")
    assert result.exit_code == 0
    assert "--- a/train.py" in result.output and "+n = torch.npu.device_count()" in result.output
    assert "1 would change" in result.output
    assert script.read_bytes() == CUDA


def test_write_then_check_is_clean(tmp_path, run_cli):
    write(tmp_path, "train.py", CUDA)
    assert run_cli(".", "--check").exit_code == 1
    assert run_cli(".", "--write").exit_code == 0
    result = run_cli(".", "--check")
    assert result.exit_code == 0, result.output
    assert "0 would change" in result.output


def test_check_prints_no_diff_unless_asked(tmp_path, run_cli):
    write(tmp_path, "train.py", CUDA)
    quiet = run_cli(".", "--check")
    assert "+++" not in quiet.output and "would migrate: train.py" in quiet.output
    assert "+++ b/train.py" in run_cli(".", "--check", "--diff").output


def test_write_and_check_conflict(tmp_path, run_cli):
    write(tmp_path, "train.py", CUDA)
    assert run_cli(".", "--write", "--check").exit_code == 2


def test_report_json(tmp_path, run_cli):
    write(tmp_path, "train.py", b"import torch\nn = torch.cuda.device_count()\ntorch.cuda.nvtx.range_push('a')\n")
    write(tmp_path, "cpu.py", CPU)
    write(tmp_path, "bad.py", b"def (:\n")
    result = run_cli(".", "--report", "report.json")
    assert result.exit_code == 2
    report = json.loads((tmp_path / "report.json").read_text())
    files = {f["path"]: f for f in report["files"]}
    assert set(files) == {"train.py", "cpu.py", "bad.py"}
    train = files["train.py"]
    assert train["changed"] is True and train["error"] is None
    fix = train["fixes"][-1]
    assert (fix["rule"], fix["start"], fix["end"]) == ("NPU101", {"line": 2, "column": 5}, {"line": 2, "column": 28})
    assert fix["applied"] is False and train["written"] is False
    finding = train["findings"][0]
    assert finding["rule"] == "NPU102" and finding["start"] == {"line": 3, "column": 1} and finding["suggestion"]
    assert files["cpu.py"]["changed"] is False
    assert files["bad.py"]["error"].startswith("bad.py:1:")
    assert report["summary"]["files_failed"] == 1


def test_select_and_ignore(tmp_path, run_cli):
    write(tmp_path, "train.py", CUDA)
    assert "torch.npu" not in run_cli(".", "--select", "NPU2").output
    assert "torch.npu" not in run_cli(".", "--ignore", "NPU101").output
    assert "torch.npu" in run_cli(".", "--select", "NPU1").output


def test_config_from_nearest_pyproject(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nignore = ["NPU101"]\nexclude = ["vendored/**"]\n'
          '[tool.npu-migrate.per-file-ignores]\n"legacy_*.py" = ["NPU1"]\n')
    write(tmp_path, "src/a.py", b"import torch\ntorch.cuda.nvtx.range_push('x')\nn = torch.cuda.device_count()\n")
    write(tmp_path, "vendored/b.py", CUDA)
    write(tmp_path, "src/legacy_c.py", b"import torch\ntorch.cuda.nvtx.range_push('x')\n")
    result = run_cli("src", "vendored")
    assert "torch.npu" not in result.output  # NPU101 ignored by config
    assert "src/a.py:2:1: NPU102" in result.output
    assert "legacy_c.py" not in result.output  # per-file-ignores
    assert "vendored" not in result.output  # excluded
    # command-line flags win over the config
    assert "+n = torch.npu.device_count()" in run_cli("src", "--ignore", "NPU010").output


def test_bad_config_is_one_line_error(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "[tool.npu-migrate]\nselekt = ['NPU1']\n")
    write(tmp_path, "a.py", CUDA)
    result = run_cli(".")
    assert result.exit_code == 2 and "unknown key(s) in [tool.npu-migrate]: selekt" in result.output


def test_discovery_skips_ignored_and_virtualenvs(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "generated/\n*_pb2.py\n")
    write(tmp_path, "generated/x.py", CUDA)
    write(tmp_path, "proto_pb2.py", CUDA)
    write(tmp_path, "venv2/pyvenv.cfg", b"home = /usr\n")
    write(tmp_path, "venv2/lib/x.py", CUDA)
    write(tmp_path, "build/x.py", CUDA)
    write(tmp_path, "pkg/__pycache__/x.py", CUDA)
    write(tmp_path, "pkg/keep.py", CUDA)
    write(tmp_path, "pkg/dist/__init__.py", CUDA)  # a package named dist is code, not build output
    result = run_cli(".", "--report", "r.json")
    paths = [f["path"] for f in json.loads((tmp_path / "r.json").read_text())["files"]]
    assert paths == ["pkg/keep.py", "pkg/dist/__init__.py"]
    # a file named explicitly is always processed
    assert "generated/x.py" in run_cli("generated/x.py").output


@pytest.mark.timeout(120)
def test_an_ignore_file_past_the_pattern_bound_is_one_error_line(tmp_path, run_cli):
    """300,000 patterns made discovery take minutes (pathspec compiles each and matches
    every path against all): past the bound the file is one error line, its rules are not
    applied, the other files are still migrated and the exit code says it failed."""
    from npu_migrate.pipeline.discovery import MAX_IGNORE_PATTERNS

    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "".join(f"pattern_{i}/\n" for i in range(MAX_IGNORE_PATTERNS + 1)).encode())
    write(tmp_path, "train.py", CUDA)
    started = time.perf_counter()
    result = run_cli(".")
    assert time.perf_counter() - started < 30
    lines = [line for line in result.output.splitlines() if ".gitignore:1:" in line]
    assert len(lines) == 1 and "patterns" in lines[0], result.output
    assert "+++ b/train.py" in result.output and result.exit_code == 2


@pytest.mark.timeout(120)
@pytest.mark.parametrize("content", [
    "*a" * 25 + "*b\n",  # one line: exponential backtracking in pathspec's regex (no answer in 60 s)
    "node_modules/\na/**/a/**/a/**/b\n",  # 3 '**': 44 s on one 4,000-character path
    "\0" * (2 << 20),  # 2 MB of NUL bytes: one pattern of 2 M characters
], ids=["many-wildcards", "three-starstar", "nul-2mb"])
def test_an_ignore_file_too_costly_to_match_is_one_error_line(tmp_path, run_cli, content):
    """Adversarial round 5: a .gitignore line is matched by a backtracking regex, so a
    pattern with many wildcards (or a huge one) made discovery hang on a long file name."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", content.encode())
    write(tmp_path, "a" * 60 + ".py", CUDA)
    deep = tmp_path.joinpath(*["a"] * 60)
    deep.mkdir(parents=True)
    write(deep, "t.py", CUDA)
    started = time.perf_counter()
    result = run_cli(".")
    assert time.perf_counter() - started < 60
    lines = [line for line in result.output.splitlines() if ".gitignore:" in line]
    assert len(lines) == 1 and "not applied" in lines[0], result.output
    assert f"+++ b/{'a' * 60}.py" in result.output and result.exit_code == 2


@pytest.mark.timeout(60)
def test_ordinary_ignore_patterns_are_within_the_wildcard_bound():
    from npu_migrate.pipeline.discovery import costly_pattern

    usual = ["*.py[cod]", "__pycache__/", "**/node_modules/**", "**/build/**/*.o", "docs/**/*.md", ".*.swp",
             "*~", "/dist", "!keep/*.log", "a/**/b/**/c", "*.egg-info/", "**/*.tmp", "logs/*/*.txt"]
    assert costly_pattern(usual) is None


@pytest.mark.timeout(60)
def test_a_costly_exclude_in_the_configuration_is_one_usage_line(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", b'[tool.npu-migrate]\nexclude = ["*a*a*a*a*a*a*a*b"]\n')
    write(tmp_path, "train.py", CUDA)
    result = run_cli(".")
    assert result.exit_code == 2 and "more wildcards" in result.output, result.output


def test_suppression_comments(tmp_path, run_cli):
    write(tmp_path, "a.py", b"import torch\n"
                            b"n = torch.cuda.device_count()  # npu-migrate: ignore\n"
                            b"m = torch.cuda.device_count()  # npu-migrate: ignore[NPU2]\n"
                            b"torch.cuda.nvtx.range_push('x')  # npu-migrate: ignore[NPU102]\n")
    result = run_cli(".")
    assert "+m = torch.npu.device_count()" in result.output
    assert "+n = torch.npu" not in result.output
    assert "a.py:4:1: NPU102" not in result.output and "0 finding(s)" in result.output


def test_parallel_jobs_match_serial(tmp_path, run_cli):
    for i in range(12):
        write(tmp_path / "src", f"m{i}.py", CUDA if i % 2 else CPU)
    # The reports go beside the tree: a JSON file in it would be migrated too (a config file).
    serial = run_cli("src", "-j", "1", "--no-cache", "--report", "s.json")
    parallel = run_cli("src", "-j", "2", "--no-cache", "--report", "p.json")
    assert serial.exit_code == parallel.exit_code == 0
    s = json.loads((tmp_path / "s.json").read_text())["files"]
    p = json.loads((tmp_path / "p.json").read_text())["files"]
    assert s == p and sum(f["changed"] for f in s) == 6


def test_cache_hit_and_corrupt_entry(tmp_path, run_cli):
    from npu_migrate.pipeline.cache import default_directory

    write(tmp_path / "src", "a.py", CUDA)  # the reports go beside the tree (JSON in it is migrated too)
    first = run_cli("src", "--report", "1.json")
    cache = default_directory(tmp_path / "src")  # the project of the files (no marker: their directory)
    assert (cache / ".gitignore").read_text().strip().endswith("*")
    entries = list(cache.rglob("*.bin"))
    assert len(entries) == 1
    entries[0].write_text("{not json")
    second = run_cli("src", "--report", "2.json")
    assert "cache entry did not verify" in second.output  # said once, and recomputed
    assert first.output == second.output.replace(
        "warning: src/a.py: cache entry did not verify (not written by this user's npu-migrate); "
        "ignored and recomputed\n", "")
    assert json.loads((tmp_path / "1.json").read_text())["files"] == json.loads((tmp_path / "2.json").read_text())["files"]
    assert entries[0].read_bytes().startswith(b"npu-migrate-cache")  # rewritten
    before = entries[0].read_bytes()
    run_cli("src", "--no-cache")
    assert list(cache.rglob("*.bin")) == entries and entries[0].read_bytes() == before


def test_cache_result_is_used(tmp_path, run_cli, monkeypatch):
    write(tmp_path, "a.py", CUDA)
    run_cli(".")
    from npu_migrate.pipeline import runner

    def boom(*a, **k):
        raise AssertionError("the engine ran although the cache had the result")

    monkeypatch.setattr(runner, "_in_workers", boom)
    assert "+n = torch.npu.device_count()" in run_cli(".").output


def test_rules_command(run_cli):
    listing = run_cli("rules")
    assert listing.exit_code == 0 and "NPU101" in listing.output and "torch-cuda-api" in listing.output
    one = run_cli("rules", "npu101")
    assert one.exit_code == 0 and "NPU101" in one.output and "torch.npu" in one.output
    assert run_cli("rules", "NPU999").exit_code == 2


def test_help_and_version_do_not_import_torch_or_libcst():
    code = (
        "import sys\n"
        "from npu_migrate.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'libcst' not in sys.modules, 'libcst imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "--write" in result.stdout and "--check" in result.stdout


def test_full_run_never_imports_torch(tmp_path):
    write(tmp_path, "a.py", CUDA)
    code = (
        "import sys\n"
        "from npu_migrate.cli import main\n"
        "try:\n    main(['--no-cache', '.'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "torch.npu.device_count" in result.stdout


def test_console_script_entry_point(tmp_path):
    write(tmp_path, "a.py", CUDA)
    result = subprocess.run([str(CONSOLE_SCRIPT), "--check", "a.py"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 1, result.stderr


def test_bundled_example_dry_run(run_cli):
    """The README's first command: a dry run over examples/cuda_project."""
    repo = Path(__file__).resolve().parents[2]
    before = {p: p.read_bytes() for p in (repo / "examples/cuda_project").glob("*.py")}
    result = run_cli("examples/cuda_project", "--no-cache", cwd=repo)
    assert result.exit_code == 0, result.output
    assert "+++ b/examples/cuda_project/train.py" in result.output
    assert "0 failed" in result.output
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_quiet_prints_only_errors(tmp_path, run_cli, flag):
    write(tmp_path, "a.py", CUDA)
    result = run_cli(".", "--check", flag)
    assert result.exit_code == 1 and result.output == ""


def test_quiet_dry_run_prints_nothing_but_errors(tmp_path, run_cli):
    write(tmp_path, "a.py", CUDA)
    write(tmp_path, "bad.py", b"def (:\n")
    result = run_cli(".", "-q")
    assert result.exit_code == 2
    assert [line for line in result.output.splitlines()] == [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "+++" in run_cli(".", "-q", "--diff").output


def test_help_shows_the_default_command_as_the_tool_itself():
    result = subprocess.run([str(CONSOLE_SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: npu-migrate [OPTIONS] [PATHS]...")
    text = " ".join(result.stdout.split())  # the epilog is wrapped to the terminal width
    assert "npu-migrate rules" in text and "npu-migrate emulate" in text


def test_rule_ids_from_file_names_match_the_rule_classes():
    from npu_migrate.pipeline.registry import all_rules, rule_ids

    assert rule_ids() == list(all_rules()) and len(rule_ids()) > 30
    for rule_id, cls in all_rules().items():
        assert cls.__module__.rsplit(".", 1)[1].startswith(rule_id.lower() + "_")


def test_a_run_the_cache_answers_does_not_import_libcst(tmp_path):
    import subprocess
    import sys

    (tmp_path / "a.py").write_text("import torch\nx = torch.cuda.is_available()\n")
    code = (
        "import sys; from npu_migrate.pipeline import runner; from npu_migrate.cli import main\n"
        "pooled, real = [], runner._in_workers\n"
        "runner._in_workers = lambda *a: (pooled.append(1), real(*a))\n"
        "try:\n    main([{args}])\nexcept SystemExit:\n    pass\n"
        "print('libcst' in sys.modules, bool(pooled))"
    )
    args = f"{str(tmp_path)!r}, '-q', '--select', 'NPU1', '--cache-dir', {str(tmp_path / 'cache')!r}"
    first = subprocess.run([sys.executable, "-c", code.format(args=args)], capture_output=True, text=True, check=False)
    second = subprocess.run([sys.executable, "-c", code.format(args=args)], capture_output=True, text=True, check=False)
    # The cold run parsed the file in a worker process; the warm run started none.
    assert first.stdout.split() == ["False", "True"], first.stderr
    assert second.stdout.split() == ["False", "False"], second.stderr


def test_a_file_that_changes_during_the_run_is_not_cached_under_its_old_content(tmp_path):
    from npu_migrate.pipeline import runner
    from npu_migrate.pipeline.cache import Cache
    from npu_migrate.pipeline.files import content_digest
    from npu_migrate.pipeline.settings import Settings

    path = tmp_path / "a.py"
    path.write_bytes(CUDA)
    store = {}

    def edited_now(settings):  # called between the digest pass and the migration
        path.write_bytes(b"x = 1\n")
        return store.setdefault("c", Cache(tmp_path / "c", settings.key()))

    results = runner.run([str(path)], Settings(), cache=edited_now)
    assert results[0].new_source is None  # migrated what is on disk now
    assert results[0].source_digest == content_digest(b"x = 1\n")
    store["c"].flush()
    assert not list((tmp_path / "c").rglob("*.bin"))  # but not cached under the first content's key
    runner.run([str(path)], Settings(), cache=lambda s: store["c"])
    store["c"].flush()
    assert len(list((tmp_path / "c").rglob("*.bin"))) == 1  # a steady file is cached


SINGLE_DEVICE = b"""import torch
model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(x).sum().backward()
"""


def test_opt_in_rule_through_extend_select_and_config(tmp_path, run_cli):
    write(tmp_path, "train.py", SINGLE_DEVICE)
    assert "distribute_model" not in run_cli(".").output
    assert "distribute_model" not in run_cli(".", "--select", "NPU5").output  # a prefix is not enough
    assert "distribute_model" in run_cli(".", "--extend-select", "NPU511").output
    assert "distribute_model" not in run_cli(".", "--extend-select", "NPU511", "--ignore", "NPU51").output
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nextend-select = ["NPU511"]\n')
    assert "distribute_model" in run_cli(".").output
    bad = run_cli(".", "--extend-select", "NPU999")
    assert bad.exit_code == 2 and "--extend-select" in bad.output


def test_rules_listing_marks_opt_in_rules(run_cli):
    listing = run_cli("rules").output
    line = next(ln for ln in listing.splitlines() if ln.startswith("NPU511"))
    assert "opt-in" in line and "--extend-select NPU511" in line
    assert "opt-in" not in next(ln for ln in listing.splitlines() if ln.startswith("NPU510"))
    doc = run_cli("rules", "NPU511").output
    assert "Opt-in: runs only when selected by its exact code" in doc
    assert '`extend-select = ["NPU511"]` in `[tool.npu-migrate]`' in doc  # brackets are not rich markup
