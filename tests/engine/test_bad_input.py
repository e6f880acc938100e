"""Bad input: a one-line error naming file (and line), file untouched, other files
still processed, exit code 2, never a traceback."""

from __future__ import annotations

import pytest

GOOD = b"import torch\nn = torch.cuda.device_count()\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "good.py").write_bytes(GOOD)
    return tmp_path


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def _assert_clean_failure(result, expected_fragment):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = _errors(result.output)
    assert len(errors) == 1 and expected_fragment in errors[0], result.output


def test_syntax_error(project, run_cli):
    bad = project / "bad.py"
    bad.write_bytes(b"import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    result = run_cli("--write", ".")
    _assert_clean_failure(result, "bad.py:2:")
    assert bad.read_bytes() == b"import torch\ndef f(:\n    torch.cuda.synchronize()\n"
    assert b"torch.npu" in (project / "good.py").read_bytes()  # the others are still processed


def test_undecodable_file(project, run_cli):
    bad = project / "bad.py"
    bad.write_bytes(b"import torch\nx = 'caf\xe9'\ntorch.cuda.synchronize()\n")  # latin-1 bytes, no cookie
    result = run_cli("--write", ".")
    _assert_clean_failure(result, "bad.py:2:")
    assert b"torch.npu" in (project / "good.py").read_bytes()


def test_unreadable_file_reported_even_as_root(project, run_cli, monkeypatch):
    """Root ignores file modes, so simulate the OS refusing the read."""
    import builtins

    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if str(path).endswith("bad.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    (project / "bad.py").write_bytes(GOOD)
    monkeypatch.setattr(builtins, "open", fake_open)
    result = run_cli(".")
    _assert_clean_failure(result, "bad.py: permission denied")


def test_broken_symlink(project, run_cli):
    (project / "link.py").symlink_to(project / "missing.py")
    result = run_cli(".")
    _assert_clean_failure(result, "link.py: broken symbolic link")


def test_missing_path(project, run_cli):
    result = run_cli("good.py", "nope.py")
    _assert_clean_failure(result, "nope.py: no such file or directory")
    assert "would change" in result.output  # good.py was still processed


def test_directory_without_supported_files(tmp_path, run_cli):
    (tmp_path / "notes.txt").write_text("cuda")
    result = run_cli(".")
    assert result.exit_code == 0
    assert "warning: no supported files found" in result.output


def test_unknown_rule_code_is_a_usage_error(project, run_cli):
    result = run_cli("--select", "NPX9", ".")
    assert result.exit_code == 2
    assert "unknown rule code" in result.output
