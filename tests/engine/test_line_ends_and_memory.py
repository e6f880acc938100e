"""Issue 29 (6): requirements files read as pip reads them (a UTF-8 BOM, lone-CR
line ends); YAML aliases never expanded; a memory failure named as such."""

from __future__ import annotations

import time

import pytest

from npu_migrate.pipeline.runner import migrate_safely
from npu_migrate.pipeline.settings import Settings


@pytest.mark.parametrize(
    "data,expected",
    [
        (b"\xef\xbb\xbftorch==2.1.0\nnumpy\n", b"\xef\xbb\xbftorch==2.1.0\ntorch-npu==2.1.*\nnumpy\n"),
        (b"torch==2.1.0\rnumpy\r", b"torch==2.1.0\rtorch-npu==2.1.*\rnumpy\r"),
        (b"numpy\rtorch==2.1.0", b"numpy\rtorch==2.1.0\rtorch-npu==2.1.*"),
        (b"\xef\xbb\xbftorch==2.1.0\r\n", b"\xef\xbb\xbftorch==2.1.0\r\ntorch-npu==2.1.*\r\n"),
    ],
)
def test_requirements_with_a_bom_or_lone_cr_line_ends_are_read_as_pip_reads_them(data, expected):
    result = migrate_safely("requirements-npu.txt", data, Settings())
    assert result.error is None and result.new_source == expected


def test_a_continued_requirement_with_lone_cr_line_ends():
    result = migrate_safely("requirements.txt", b"numpy\rtorch>=2.1\\\r  ; python_version>'3'\r", Settings())
    assert result.error is None
    assert any("torch>=2.1" in f.message for f in result.findings)


def _bomb(levels: int) -> bytes:
    lines = ['a0: &a0 ["cuda", "nccl", "cuda", "nccl", "cuda", "nccl", "cuda", "nccl", "cuda"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return ("\n".join(lines) + "\ndevice: cuda\n").encode()


@pytest.mark.parametrize("levels", [5, 10, 30])
def test_a_yaml_alias_bomb_is_not_expanded(levels):
    start = time.perf_counter()
    result = migrate_safely("c.yaml", _bomb(levels), Settings())
    assert time.perf_counter() - start < 5
    assert result.error is None


def test_too_many_aliases_is_one_line():
    from npu_migrate.configs.yaml_reader import MAX_ALIASES

    data = b"a: &a cuda\nb: [" + b", ".join([b"*a"] * (MAX_ALIASES + 1)) + b"]\n"
    result = migrate_safely("c.yaml", data, Settings())
    assert result.error == f"c.yaml:1: more than {MAX_ALIASES} YAML aliases; skipped"


def test_a_memory_error_is_named_as_such(monkeypatch):
    import ast

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(ast, "parse", exhausted)
    result = migrate_safely("a.py", b"import torch\ntorch.cuda.synchronize()\n", Settings())
    assert result.error.startswith("a.py:1: not migrated: out of memory (0.0 MB file, limit ") \
        and "nested" not in result.error


def test_a_python_file_that_cannot_fit_is_refused_before_it_is_parsed(monkeypatch):
    import ast

    from npu_migrate.pipeline import limits

    parsed = []
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parsed.append(1))
    monkeypatch.setattr(limits, "memory_limit", lambda: 100 << 20)  # 100 MB left
    lines = (100 << 20) // limits.PYTHON_BYTES_PER_LINE + 10
    result = migrate_safely("a.py", b"x = 1\n" * lines, Settings())
    assert result.error == (f"a.py:1: not migrated: out of memory (about {(lines + 1) * 12 >> 10} MB for "
                            f"{lines + 1} lines, limit 100 MB); skipped")
    assert parsed == []
    # (a file CPython cannot parse is left unchanged, NPU013: the small one is parsed for real)
    monkeypatch.undo()
    fits = migrate_safely("a.py", b"import torch\ntorch.cuda.synchronize()\n", Settings())
    assert fits.error is None and fits.new_source is not None


@pytest.mark.timeout(300)
def test_under_a_low_address_space_limit_the_big_file_fails_in_one_line_and_the_rest_migrate(tmp_path):
    import resource
    import subprocess
    import sys

    (tmp_path / "big.py").write_text("import torch\n" + "".join(f"x{i} = {i}\n" for i in range(150_000)))
    (tmp_path / "small.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1200 << 20, 1200 << 20))

    done = subprocess.run([sys.executable, "-m", "npu_migrate", "--no-cache", "--write", "."], cwd=tmp_path,
                          capture_output=True, text=True, preexec_fn=cap, timeout=280, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "big.py" in line]
    assert len(errors) == 1 and "big.py:1: not migrated: out of memory (about " in errors[0]
    assert ".npu()" in (tmp_path / "small.py").read_text()
    assert "x149999 = 149999" in (tmp_path / "big.py").read_text()


def test_a_worker_killed_for_memory_is_named_as_such():
    import signal

    from npu_migrate.pipeline.runner import _worker_died

    for sig in (signal.SIGKILL, signal.SIGABRT):
        error = _worker_died("a.py", -sig).error
        assert error.startswith("a.py:1: the worker migrating this file died") and "out of memory" in error
    assert "internal error" in _worker_died("a.py", -signal.SIGSEGV).error
