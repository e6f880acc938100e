"""``npu-migrate explain FILE:LINE``: the rules that change or report a line, and why."""

from __future__ import annotations

import subprocess

import pytest

LOADER = (
    b"import torch\n"
    b"\n"
    b"\n"
    b"def pick(device):\n"
    b"    gpu = device.type == 'cuda' and torch.cuda.is_available()\n"
    b"    npu = device.type == 'npu'\n"
    b"    if gpu:\n"
    b"        return torch.cuda.Stream()\n"
    b"    elif npu:\n"
    b"        return torch.npu.Stream()\n"
    b"    return torch.ones(2, device='cuda')\n"
)


def test_explains_a_fix_with_its_evidence(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(LOADER)
    out = run_cli("explain", "train.py:11").output.splitlines()
    assert out[0] == "train.py:11: return torch.ones(2, device='cuda')"
    assert "  NPU104 (cuda-device-string) [fix] column 33: device string 'cuda' -> 'npu'" in out
    assert "    why: passed as `device=` to `torch.ones`" in out
    assert (tmp_path / "train.py").read_bytes() == LOADER  # nothing written


def test_explains_a_line_left_alone(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(LOADER)
    out = run_cli("explain", "train.py:5").output
    assert "NPU010 (already-npu-aware) [left unchanged]" in out
    assert "`gpu` is tested in an if/elif chain that already tests the NPU" in out
    assert "the chain's NPU test is `npu`" in out
    assert "no rule" in run_cli("explain", "train.py:2").output


def test_bad_locations_are_one_line_errors(tmp_path, run_cli):
    (tmp_path / "train.py").write_bytes(LOADER)
    for location, message in (("train.py", "expected FILE:LINE"), ("train.py:99", "has 11 line(s)"),
                              ("missing.py:1", "cannot read")):
        result = run_cli("explain", location)
        assert result.exit_code == 2 and message in result.output


@pytest.mark.timeout(60)
def test_after_write_explains_from_git_head(tmp_path, run_cli):
    """After --write the file has nothing left to do: the version in git HEAD is migrated
    and its positions are moved onto the file on disk (five lines lower: the added guarded import)."""
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "train.py").write_bytes(LOADER)
    git("init", "-q")
    git("add", "train.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    run_cli("train.py", "--no-cache", "--write")
    assert b"device='npu'" in (tmp_path / "train.py").read_bytes()
    out = run_cli("explain", "train.py:16").output
    assert "train.py:16: return torch.ones(2, device='npu')" in out
    assert "git HEAD" in out and "why: passed as `device=` to `torch.ones`" in out


@pytest.mark.timeout(60)
def test_after_write_a_finding_left_on_the_line_does_not_hide_its_fix(tmp_path, run_cli):
    """NPU109 still reports `x.double().npu()` after --write; explain must also show the
    NPU103 fix that made `.npu()` out of `.cuda()` on that line (read from git HEAD)."""
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "grid.py").write_bytes(b"import torch\n\nw = torch.randn(3).double().cuda()\n")
    git("init", "-q")
    git("add", "grid.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    run_cli("grid.py", "--no-cache", "--write")
    assert b".double().npu()" in (tmp_path / "grid.py").read_bytes()
    out = run_cli("explain", "grid.py:8").output
    assert "NPU103 (tensor-cuda-method) [fix]" in out and "NPU109 (float64-on-device) [left for you]" in out
    assert "git HEAD" in out
