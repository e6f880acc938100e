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
    result = migrate_safely("requirements.txt", data, Settings())
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
    assert result.error.startswith("a.py:1: out of memory while parsing") and "nested" not in result.error


def test_a_worker_killed_for_memory_is_named_as_such():
    import signal

    from npu_migrate.pipeline.runner import _worker_died

    for sig in (signal.SIGKILL, signal.SIGABRT):
        error = _worker_died("a.py", -sig).error
        assert error.startswith("a.py:1: the worker migrating this file died") and "out of memory" in error
    assert "internal error" in _worker_died("a.py", -signal.SIGSEGV).error
