"""diagnose on hostile streams and trees (held-out round of issue 38): a file name of
undecodable bytes, a terminal whose encoding cannot hold the log's text, standard
streams that are closed, full or a closed pipe, and a plog tree 1,500 directories deep
end with a report or one line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from npu_runtime.diagnose.cli import main

from .excerpts import EXCERPTS

OOM = EXCERPTS["npu-oom"][0]


def _run(args, **kwargs):
    return subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", *args], capture_output=True, timeout=50,
                          check=False, **kwargs)


def test_undecodable_bytes_of_a_file_name_are_escaped_not_written_raw(tmp_path, capsys):
    """os.fsdecode turns the name's bytes 0xff and 0x9b (CSI on an 8-bit terminal) into lone
    surrogates; printed through surrogateescape they were the raw bytes again."""
    plog = tmp_path / "plog"
    plog.mkdir()
    for name in (b"a\xff\x9b2J.log", b"b.log"):
        with open(os.path.join(os.fsencode(plog), name), "w", encoding="utf-8") as f:
            f.write(OOM)
    assert main([str(plog)]) == 1
    out = capsys.readouterr().out
    assert "a\\xff\\x9b2J.log" in out
    assert not any(0xDC80 <= ord(ch) <= 0xDCFF for ch in out)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_log_text_the_terminal_cannot_encode_is_escaped(tmp_path, encoding):
    log = tmp_path / "cjk.log"
    log.write_text("EL0004: 内存分配失败 Failed to allocate memory\n", encoding="utf-8")
    done = _run([str(log)], env={**os.environ, "PYTHONIOENCODING": encoding})
    assert done.returncode == 1, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert b"\\u5185\\u5b58" in done.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", ["closed stdin", "stdout closed", "stdout full", "closed pipe"])
def test_closed_or_full_standard_streams_are_one_line(tmp_path, shape):
    log = tmp_path / "a.log"
    log.write_text(OOM * 2000)  # more than a pipe buffer's worth of report once it is diagnosed twice
    if shape == "closed stdin":
        done = _run(["-"], stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
    elif shape == "stdout closed":
        done = subprocess.run(f'"{sys.executable}" -m npu_runtime.diagnose "{log}" >&-', shell=True,
                              capture_output=True, timeout=50, check=False)
    elif shape == "stdout full":
        with open("/dev/full", "w") as full:
            done = subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", str(log)], stdout=full,
                                  stderr=subprocess.PIPE, timeout=50, check=False)
    else:
        done = subprocess.run(f'"{sys.executable}" -m npu_runtime.diagnose "{log}" "{log}" | true', shell=True,
                              capture_output=True, timeout=50, check=False,
                              executable="/bin/bash")
    err = done.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    if shape != "closed pipe":  # the shell's status is true's
        assert done.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.timeout(60)
def test_exit_class_still_prints_the_class_when_stderr_cannot_be_written(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(OOM)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", "--exit-class", str(log)],
                              stdout=subprocess.PIPE, stderr=full, timeout=50, check=False)
    assert done.returncode == 1 and done.stdout == b"78\n"


@pytest.mark.timeout(60)
def test_a_plog_tree_deeper_than_the_recursion_limit_is_walked(tmp_path, capsys):
    """os.walk recursed once per level (Python < 3.12): 1,500 levels were a RecursionError."""
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(1500):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("plog-1.log", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
            f.write(OOM)
    finally:
        os.close(fd)
    try:
        assert main([str(tmp_path)]) == 1
        assert "npu-oom" in capsys.readouterr().out
    finally:  # pytest's own removal of old tmp_paths recurses once per level too; rm uses fts
        subprocess.run(["rm", "-rf", str(tmp_path / "d")], timeout=50, check=False)
