"""The conventions ruff, black and pre-commit users bring: --fix, --extend-select,
--extend-ignore, --exclude/--extend-exclude, --force-exclude, --fail-on-findings,
--exit-zero, standard input, report paths checked before anything is written,
usage errors that name the tool, and a progress bar that renders on a terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import CONSOLE_SCRIPT, CPU, CUDA, write

REPO = Path(__file__).resolve().parents[2]
FINDING = b"import torch\ntorch.cuda.nvtx.range_push('a')\n"


def cli(cwd: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    """The installed console script, as a user (or pre-commit, or an editor) runs it."""
    return subprocess.run([str(CONSOLE_SCRIPT), *args], cwd=cwd, input=input, capture_output=True,
                          timeout=120, check=False)


# -- usage ----------------------------------------------------------------------


def test_usage_errors_name_the_tool_not_an_internal_subcommand(tmp_path):
    for args in (["--jobs", "x"], ["--bogus"], ["--write", "--check", "."]):
        result = cli(tmp_path, *args)
        err = result.stderr.decode()
        assert result.returncode == 2
        assert "Usage: npu-migrate [OPTIONS] [PATHS]..." in err and "migrate migrate" not in err
        assert "npu-migrate migrate" not in err


def test_fix_is_write(tmp_path, run_cli):
    path = write(tmp_path, "a.py", CUDA)
    result = run_cli("a.py", "--fix")
    assert result.exit_code == 0 and b"torch.npu.device_count" in path.read_bytes()


def test_the_readme_configuration_example_runs(tmp_path, run_cli):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Configuration"):]
    toml = re.search(r"```toml\n(.*?)```", section, re.DOTALL).group(1)
    write(tmp_path, "pyproject.toml", toml)
    write(tmp_path, "src/train.py", CUDA)
    result = run_cli(".")
    assert result.exit_code == 0, result.output
    assert "+n = torch.npu.device_count()" in result.output


def test_unknown_codes_name_where_they_were_written(tmp_path, run_cli):
    write(tmp_path, "a.py", CUDA)
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nignore = ["NPU404"]\n')
    result = run_cli(".")
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: {tmp_path / 'pyproject.toml'}: [tool.npu-migrate] ignore: "
                                     "unknown rule code or prefix 'NPU404' (see 'npu-migrate rules')")
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nper-file-ignores = { "t/**" = ["NPU9999"] }\n')
    assert "per-file-ignores 't/**'" in run_cli(".").output
    write(tmp_path, "pyproject.toml", "")
    flag = run_cli(".", "--extend-select", "NPU1,XYZ")
    assert flag.exit_code == 2 and "error: --extend-select: unknown rule code or prefix 'XYZ'" in flag.output


def test_extend_select_and_extend_ignore_add_to_the_configured_lists(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nselect = ["NPU2"]\nignore = ["NPU201"]\n')
    write(tmp_path, "a.py", b"import torch\nimport torch.distributed as dist\nn = torch.cuda.device_count()\n"
                            b"ok = dist.is_nccl_available()\ntorch.cuda.nvtx.range_push('a')\n")
    configured = run_cli("a.py", "--no-cache").output
    assert "is_hccl_available" in configured and "torch.npu" not in configured
    extended = run_cli("a.py", "--no-cache", "--extend-select", "NPU101").output
    assert "is_hccl_available" in extended and "torch.npu.device_count" in extended
    assert "NPU102" not in extended  # extend-select adds NPU101 only
    replaced = run_cli("a.py", "--no-cache", "--select", "NPU101").output
    assert "is_hccl_available" not in replaced and "torch.npu.device_count" in replaced
    ignored = run_cli("a.py", "--no-cache", "--extend-select", "NPU1", "--extend-ignore", "NPU202").output
    assert "is_hccl_available" not in ignored and "NPU102" in ignored


def test_exclude_replaces_and_extend_exclude_adds(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nexclude = ["vendored/"]\n')
    write(tmp_path, "vendored/v.py", CUDA)
    write(tmp_path, "legacy/l.py", CUDA)
    write(tmp_path, "src/s.py", CUDA)

    def seen(*args):
        out = run_cli(".", "--no-cache", "--check", *args).output
        return {line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("would migrate: ")}

    assert seen() == {"legacy/l.py", "src/s.py"}
    assert seen("--extend-exclude", "legacy/") == {"src/s.py"}
    assert seen("--exclude", "legacy/") == {"vendored/v.py", "src/s.py"}


def test_force_exclude_applies_exclusions_to_named_files(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nexclude = ["third_party/", "*_pb2.py"]\n')
    named = ["third_party/x.py", "gen_pb2.py", "build/out.py", "src/a.py"]
    for rel in named:
        write(tmp_path, rel, CUDA)
    plain = run_cli(*named, "--check")
    assert plain.exit_code == 1 and plain.output.count("would migrate:") == 4  # named: processed
    forced = run_cli(*named, "--check", "--force-exclude")
    assert forced.output.count("would migrate:") == 1 and "would migrate: src/a.py" in forced.output
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nexclude = ["third_party/"]\nforce-exclude = true\n')
    assert "third_party" not in run_cli("third_party/x.py", "src/a.py", "--check").output
    assert run_cli("third_party/x.py", "--check").exit_code == 0  # everything excluded: nothing to do


# -- exit codes -----------------------------------------------------------------


def test_fail_on_findings_and_exit_zero(tmp_path, run_cli):
    write(tmp_path, "a.py", FINDING)
    assert run_cli(".").exit_code == 0  # findings alone do not fail a run by default
    assert run_cli(".", "--fail-on-findings").exit_code == 1
    assert run_cli(".", "--fail-on-findings", "--exit-zero").exit_code == 0
    write(tmp_path, "pyproject.toml", "[tool.npu-migrate]\nfail-on-findings = true\n")
    assert run_cli(".").exit_code == 1
    assert run_cli(".", "--no-fail-on-findings").exit_code == 0
    write(tmp_path, "b.py", CUDA)
    assert run_cli(".", "--check", "--no-fail-on-findings").exit_code == 1
    assert run_cli(".", "--check", "--exit-zero").exit_code == 0
    write(tmp_path, "bad.py", b"def (:\n")
    assert run_cli(".", "--exit-zero").exit_code == 2  # errors are never hidden


def test_suppressed_findings_do_not_fail_the_run(tmp_path, run_cli):
    write(tmp_path, "a.py", b"import torch\ntorch.cuda.nvtx.range_push('a')  # noqa: NPU102\n")
    assert run_cli(".", "--fail-on-findings").exit_code == 0
    write(tmp_path, "a.py", b"import torch\ntorch.cuda.nvtx.range_push('a')  # noqa: NPU1O2\n")
    result = run_cli(".", "--fail-on-findings")
    assert result.exit_code == 1 and "a.py:2:42: NPU001 `NPU1O2` in `# noqa: NPU1O2`" in result.output
    assert "a.py:2:1: NPU102" in result.output


# -- report paths ---------------------------------------------------------------


@pytest.mark.parametrize("flag,target,reason", [
    ("--report", "nodir/r.json", "no such directory: nodir"),
    ("--report", "/proc/version", "cannot create a file in /proc"),
    ("--output-file", "missing/folder/out.sarif", "no such directory: missing/folder"),
    ("--output-file", ".", "is a directory"),
])
def test_report_paths_are_checked_before_anything_is_written(tmp_path, flag, target, reason):
    source = write(tmp_path, "a.py", CUDA)
    result = cli(tmp_path, ".", "--write", flag, target)
    err = result.stderr.decode().splitlines()
    assert result.returncode == 2
    assert err == [f"error: {flag} {target}: {reason}" + err[0].split(reason, 1)[1]] and reason in err[0]
    assert result.stdout == b"" and "Traceback" not in result.stderr.decode()
    assert source.read_bytes() == CUDA  # nothing migrated
    assert not (tmp_path / ".npu_migrate_cache").exists()


def test_reports_go_to_special_files_and_replace_old_ones(tmp_path, run_cli):
    write(tmp_path, "a.py", CUDA)
    (tmp_path / "r.json").write_text("old")
    os.chmod(tmp_path / "r.json", 0o640)
    assert run_cli(".", "--report", "r.json", "-o", os.devnull).exit_code == 0
    assert (tmp_path / "r.json").read_text().startswith("{") and (tmp_path / "r.json").stat().st_mode & 0o777 == 0o640
    assert not list(tmp_path.glob(".npu-migrate-report-*"))


# -- standard input -------------------------------------------------------------


def test_stdin_prints_the_migrated_source(tmp_path):
    result = cli(tmp_path, "-", "--stdin-filename", "src/train.py", input=CUDA + b"torch.cuda.nvtx.range_push('a')\n")
    assert result.returncode == 0
    assert result.stdout == b"import torch\n\ntry:\n    import torch_npu  # noqa: F401\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\n    torch.npu = torch.cuda\n\nn = torch.npu.device_count()\ntorch.cuda.nvtx.range_push('a')\n"
    # findings on stderr, at their place in the printed source
    assert "src/train.py:9:1: NPU102" in result.stderr.decode()


def test_stdin_unchanged_source_comes_back_byte_for_byte(tmp_path):
    data = b"\xef\xbb\xbfx = 1\r\ny = 2\r\n"
    assert cli(tmp_path, "-", input=data).stdout == data


def test_stdin_check_and_diff(tmp_path):
    check = cli(tmp_path, "-", "--stdin-filename", "a.py", "--check", input=CUDA)
    assert check.returncode == 1 and check.stdout == b""
    assert cli(tmp_path, "-", "--check", input=CPU).returncode == 0
    diff = cli(tmp_path, "-", "--stdin-filename", "a.py", "--diff", input=CUDA)
    assert diff.returncode == 0 and b"+++ b/a.py" in diff.stdout and b"+n = torch.npu.device_count()" in diff.stdout


def test_stdin_bad_source_is_echoed_with_one_error(tmp_path):
    result = cli(tmp_path, "-", "--stdin-filename", "a.py", input=b"def (:\n")
    assert result.returncode == 2 and result.stdout == b"def (:\n"
    assert result.stderr.decode().startswith("error: a.py:1:5: syntax error")


def test_stdin_filename_selects_config_and_per_file_ignores(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.npu-migrate]\nexclude = ["vendored/"]\n'
                                      'per-file-ignores = { "tests/**" = ["NPU1"] }\n')
    assert cli(tmp_path, "-", "--stdin-filename", "tests/t.py", input=CUDA).stdout == CUDA
    assert b"torch.npu" in cli(tmp_path, "-", "--stdin-filename", "src/t.py", input=CUDA).stdout
    assert b"torch.npu" in cli(tmp_path, "-", "--stdin-filename", "vendored/v.py", input=CUDA).stdout
    excluded = cli(tmp_path, "-", "--stdin-filename", "vendored/v.py", "--force-exclude", input=CUDA)
    assert excluded.returncode == 0 and excluded.stdout == CUDA


def test_stdin_with_a_machine_format_needs_an_output_file(tmp_path):
    result = cli(tmp_path, "-", "--output-format", "json", input=CUDA)
    assert result.returncode == 2 and b"--output-file" in result.stderr
    ok = cli(tmp_path, "-", "--stdin-filename", "a.py", "--output-format", "json", "-o", "r.json", input=CUDA)
    assert ok.returncode == 0 and b"torch.npu" in ok.stdout
    assert '"mode": "stdin"' in (tmp_path / "r.json").read_text()


def test_dash_cannot_be_mixed_with_paths(tmp_path):
    result = cli(tmp_path, "-", "a.py", input=CUDA)
    assert result.returncode == 2 and result.stdout == b""


# -- the terminal ---------------------------------------------------------------


def test_progress_bar_renders_on_a_terminal(tmp_path):
    """Under a pseudo-terminal the progress bar draws; its markup is never printed."""
    import pty
    import select

    for i in range(12):
        write(tmp_path, f"m{i}.py", CUDA if i % 2 else CPU)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal
        os.chdir(tmp_path)
        os.environ.update(COLUMNS="100", TERM="xterm-256color")
        os.execv(str(CONSOLE_SCRIPT), [str(CONSOLE_SCRIPT), ".", "--no-cache", "-j", "1", "--no-diff"])
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            os.kill(pid, 9)
            raise AssertionError("the CLI hung under a pseudo-terminal")
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    screen = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, screen
    assert "[progress.description]" not in screen and "[/" not in screen
    assert "migrating" in screen  # the bar was drawn (and then cleared)
    assert "12 file(s) scanned" in screen


def test_the_progress_bar_is_not_drawn_without_a_terminal(tmp_path):
    for i in range(12):
        write(tmp_path, f"m{i}.py", CPU)
    result = cli(tmp_path, ".", "--no-cache")
    assert b"migrating" not in result.stderr and b"\x1b[" not in result.stderr


def test_python_dash_m_runs_the_same_cli(tmp_path):
    write(tmp_path, "a.py", CUDA)
    result = subprocess.run([sys.executable, "-m", "npu_migrate", "--check", "a.py"], cwd=tmp_path,
                            capture_output=True, timeout=120, check=False)
    assert result.returncode == 1 and b"would migrate: a.py" in result.stderr


def test_a_report_that_cannot_be_written_at_the_end_is_one_line(tmp_path, run_cli, monkeypatch):
    import errno

    from npu_migrate.reporting import sink

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    write(tmp_path, "a.py", CUDA)
    monkeypatch.setattr(sink, "write", full)
    result = run_cli(".", "--report", "r.json")
    assert result.exit_code == 2
    assert "error: --report r.json: cannot write: No space left on device" in result.output


def test_a_file_gone_before_its_diff_is_one_line(tmp_path, run_cli, monkeypatch):
    from npu_migrate.pipeline import runner

    write(tmp_path, "a.py", CUDA)
    write(tmp_path, "b.py", CUDA)
    real_run = runner.run

    def run_then_delete(*args, **kwargs):
        results = real_run(*args, **kwargs)
        (tmp_path / "a.py").unlink()
        return results

    monkeypatch.setattr(runner, "run", run_then_delete)
    result = run_cli(".", "--no-cache")
    assert result.exit_code == 2
    assert "error: a.py: no such file (deleted during the run?)" in result.output
    assert "+++ b/b.py" in result.output


@pytest.mark.timeout(120)
def test_a_report_to_a_fifo_nobody_reads_is_one_line_not_a_hang(tmp_path):
    """Issue 38 break (b): -o/--report naming a FIFO with no reader blocked in open() for ever
    (the run never ended). It is refused before the run with one line, exit 2; a FIFO that is
    read gets the report (the descriptor checked is the one written: no early EOF for the
    reader), and a socket is refused too."""
    import socket
    import threading

    write(tmp_path, "a.py", CUDA)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for flag in ("-o", "--report"):
        result = cli(tmp_path, "a.py", flag, "out.fifo")
        err = result.stderr.decode().strip().splitlines()
        assert result.returncode == 2 and len(err) == 1 and "out.fifo" in err[0] and "nobody reads" in err[0]
    assert (tmp_path / "a.py").read_bytes() == CUDA
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = cli(tmp_path, "a.py", "-o", "out.fifo", "--output-format", "json")
    reader.join(30)
    assert result.returncode == 0 and got and got[0].startswith(b"{")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        result = cli(tmp_path, "a.py", "-o", "sock")
    assert result.returncode == 2 and "a socket" in result.stderr.decode()
