"""``python -m npu_runtime.diagnose`` / ``npu-migrate diagnose`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main as npu_migrate_main
from npu_runtime.diagnose.cli import main

from .excerpts import EXCERPTS, HEALTHY


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_json_names_cause_line_and_restart(tmp_path, capsys):
    log = _write(tmp_path, "rank0.log", "".join(HEALTHY) + EXCERPTS["npu-oom"][0])
    assert main(["--output-format", "json", log]) == 1
    out = json.loads(capsys.readouterr().out)
    (d,) = out["diagnoses"]
    assert d["id"] == "npu-oom" and d["line"] == len(HEALTHY) + 1 and d["file"] == log
    assert d["restart"] is False and d["severity"] == "error" and "batch size" in d["action"]


def test_clean_log_exits_0_with_an_empty_list(tmp_path, capsys):
    log = _write(tmp_path, "ok.log", "".join(HEALTHY))
    assert main(["--output-format", "json", log]) == 0
    assert json.loads(capsys.readouterr().out) == {"diagnoses": []}


def test_a_warning_alone_is_no_failure(tmp_path, capsys):
    log = _write(tmp_path, "w.log", EXCERPTS["cpu-fallback"][0])
    assert main([log]) == 0
    assert "warning: an operator is not supported" in capsys.readouterr().out


def test_text_output_root_cause_first_with_file_and_line(tmp_path, capsys):
    a = _write(tmp_path, "rank0.log", EXCERPTS["hccl-exec-timeout"][0])
    b = _write(tmp_path, "rank3.log", "start\n" + EXCERPTS["hbm-ecc"][1])
    assert main([a, b]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"{b}:4: error: uncorrectable device memory error") and "(root cause)" in first


def test_plog_directory_is_walked_without_following_links(tmp_path, capsys):
    plog = tmp_path / "plog"
    plog.mkdir()
    (plog / "plog-1234_20260302.log").write_text(EXCERPTS["hccl-connect-timeout"][0])
    (plog / "notes.md").write_text(EXCERPTS["npu-oom"][0])  # not a log file name
    outside = _write(tmp_path, "outside.log", EXCERPTS["hbm-ecc"][0])
    os.symlink(outside, plog / "link.log")
    assert main(["--output-format", "json", str(plog)]) == 1
    ids = [d["id"] for d in json.loads(capsys.readouterr().out)["diagnoses"]]
    assert ids == ["hccl-connect-timeout"]


def test_unreadable_log_is_one_line_and_exit_2(tmp_path, capsys):
    missing = str(tmp_path / "nope.log")
    assert main([missing]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and missing in err[0]


@pytest.mark.timeout(20)
def test_a_fifo_does_not_block(tmp_path, capsys):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    assert main([str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_module_reads_stdin_and_needs_no_torch():
    code = ("import sys, runpy; sys.argv=['diagnose','-']; "
            "sys.modules['torch']=None; runpy.run_module('npu_runtime.diagnose', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], input=EXCERPTS["nccl-backend"][0],
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 1, done.stderr
    assert "NCCL" in done.stdout and "hccl" in done.stdout


def test_npu_migrate_diagnose_is_the_same_program(tmp_path):
    log = _write(tmp_path, "r.log", EXCERPTS["cann-not-set"][0])
    result = CliRunner().invoke(npu_migrate_main, ["diagnose", "--output-format", "json", log])
    assert result.exit_code == 1
    assert json.loads(result.output)["diagnoses"][0]["id"] == "cann-not-set"


def test_gzip_logs_are_read_through_by_name_or_in_a_plog_directory(tmp_path, capsys):
    import gzip

    plog = tmp_path / "plog"
    plog.mkdir()
    with gzip.open(plog / "plog-2717_20260302.log.gz", "wt") as f:
        f.write("start\n" + EXCERPTS["hccl-connect-timeout"][1])
    single = tmp_path / "rank3.log"  # compressed without saying so in its name
    single.write_bytes(gzip.compress(("ok\n" + EXCERPTS["hbm-ecc"][0]).encode()))
    assert main(["--output-format", "json", str(plog), str(single)]) == 1
    got = [(d["id"], os.path.basename(d["file"]), d["line"]) for d in json.loads(capsys.readouterr().out)["diagnoses"]]
    assert got == [("hbm-ecc", "rank3.log", 2), ("hccl-connect-timeout", "plog-2717_20260302.log.gz", 2)]


def test_a_truncated_gzip_log_is_one_line_and_exit_2(tmp_path, capsys):
    import gzip

    log = tmp_path / "cut.log.gz"
    log.write_bytes(gzip.compress(b"x\n" * 100_000)[:200])
    assert main([str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(log) in err[0]


def test_crlf_and_undecodable_bytes_keep_line_numbers(tmp_path, capsys):
    log = tmp_path / "rank1.log"
    log.write_bytes(b"ok\r\n\xd6\xd0\xce\xc4 \xff\r\n" + EXCERPTS["npu-oom"][1].encode().replace(b"\n", b"\r\n"))
    assert main(["--output-format", "json", str(log)]) == 1
    (d,) = json.loads(capsys.readouterr().out)["diagnoses"]
    assert (d["id"], d["line"]) == ("npu-oom", 3) and not d["evidence"].endswith("\r")


def test_a_line_longer_than_the_limit_is_dropped_in_bounded_memory(tmp_path, capsys):
    import tracemalloc

    log = tmp_path / "huge.log"
    with open(log, "wb") as f:
        f.write(b"x" * 40_000_000 + b" NPU out of memory\n")  # past MAX_LINE: not evidence
        f.write(EXCERPTS["npu-oom"][1].encode())
    tracemalloc.start()
    try:
        assert main(["--output-format", "json", str(log)]) == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    (d,) = json.loads(capsys.readouterr().out)["diagnoses"]
    assert d["line"] == 2
    assert peak < 8_000_000, peak  # a few chunks of MAX_LINE, never the 40 MB line


@pytest.mark.timeout(60)
def test_stdin_bytes_that_are_not_utf8_are_read_not_a_traceback():
    done = subprocess.run([sys.executable, "-m", "npu_runtime.diagnose", "-"],
                          input=b"\xd6\xd0\xce\xc4\r\n" + EXCERPTS["hccl-exec-timeout"][0].encode(),
                          capture_output=True, timeout=50, env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 1, done.stderr
    assert done.stdout.decode().startswith("<stdin>:2: error: a collective did not complete")


@pytest.mark.parametrize(("text", "stdout"), [
    (EXCERPTS["hccl-exec-timeout"][0] + EXCERPTS["npu-oom"][0], "78\n"),  # the root cause's class
    (EXCERPTS["hbm-ecc"][0], "77\n"),
    (EXCERPTS["hccl-exec-timeout"][0], ""),  # restartable, but no runtime class
    ("".join(HEALTHY), ""),
])
def test_exit_class_prints_only_the_root_causes_class_and_reports_on_stderr(tmp_path, capsys, text, stdout):
    log = _write(tmp_path, "node_0.log", text)
    main(["--exit-class", log])
    out, err = capsys.readouterr()
    assert out == stdout
    if text != "".join(HEALTHY):
        assert "(root cause)" in err


def test_terminal_controls_in_evidence_and_file_names_are_escaped(tmp_path, capsys):
    """issue 38.3: a log line that retitles and clears the terminal, in a file whose name holds
    an escape sequence and a C1 CSI, is printed escaped; JSON escapes them itself."""
    hostile = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"
    log = _write(tmp_path, f"rank0{hostile}.log", f"{hostile}RuntimeError: NPU out of memory{hostile}\n")
    assert main([log]) == 1
    out = capsys.readouterr().out
    assert not any(ch in out for ch in "\x1b\x07\x9b\u202e")
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202e" in out
    assert main(["--output-format", "json", log]) == 1
    (d,) = json.loads(capsys.readouterr().out)["diagnoses"]
    assert d["file"] == log and hostile in d["evidence"]
    assert main([str(tmp_path / f"missing{hostile}.log")]) == 2
    assert "\x1b" not in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_a_gzip_bomb_is_read_up_to_a_bound_with_one_note(tmp_path, capsys, monkeypatch):
    """Round 4, held-out pass: a 4 MB .log.gz inflating to 4 GB took 37 s (a 50 MB one,
    minutes); reading stops at MAX_GZIP_BYTES with one note, what came before still counts."""
    import gzip

    from npu_runtime.diagnose import scan

    monkeypatch.setattr(scan, "MAX_GZIP_BYTES", 1 << 20)
    log = tmp_path / "bomb.log.gz"
    log.write_bytes(gzip.compress(EXCERPTS["npu-oom"][0].encode() + b"\n" + b"x" * (8 << 20)))
    assert main([str(log)]) == 1
    err = capsys.readouterr().err
    assert err.count("only the first 1 MB") == 1


def test_every_file_name_diagnose_prints_is_escaped(tmp_path, capsys, monkeypatch):
    """A plog folder whose files' names retitle and clear the terminal: the names in the
    report, in its "also in" list and in the note on a capped gzip log are escaped."""
    import gzip

    from npu_runtime.diagnose import scan

    monkeypatch.setattr(scan, "MAX_GZIP_BYTES", 1 << 10)
    hostile = "\x1b]0;title\x07\x1b[2J"
    plog = tmp_path / "plog"
    plog.mkdir()
    for rank in (0, 1):
        (plog / f"plog-{rank}{hostile}.log").write_text(EXCERPTS["hbm-ecc"][0], encoding="utf-8")
    (plog / f"plog-2{hostile}.log.gz").write_bytes(gzip.compress(EXCERPTS["hbm-ecc"][0].encode() + b"x" * 4096))
    assert main([str(plog)]) == 1
    out, err = capsys.readouterr()
    assert "also in" in out and "only the first" in err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert out.count("\\x1b]0;title\\x07\\x1b[2J") == 3  # the file, then the two in "also in"
    assert "plog-2\\x1b]0;title\\x07\\x1b[2J.log.gz: only the first" in err


@pytest.mark.timeout(60)
def test_a_log_of_millions_of_gzip_members_is_one_line_and_exit_2(tmp_path, capsys):
    """Round 4, issue 38 break (a): 2 million empty gzip members (40 MB) inflate to nothing, so
    MAX_GZIP_BYTES never stopped them, and each cost a header parse in Python: 16 to 32 s.
    Past MAX_GZIP_MEMBERS the log is one line naming it, exit 2; a few members still read."""
    import gzip
    import time

    log = tmp_path / "bomb.log.gz"
    log.write_bytes(gzip.compress(b"", mtime=0) * 2_000_000)
    started = time.monotonic()
    assert main([str(log)]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(log) in err[0] and "gzip members" in err[0]
    joined = tmp_path / "rotated.log.gz"  # rotated logs joined with cat, zero padding after
    joined.write_bytes(b"".join(gzip.compress(f"line {i}\n".encode()) for i in range(200))
                       + gzip.compress(EXCERPTS["npu-oom"][0].encode()) + b"\0" * 8)
    assert main(["--output-format", "json", str(joined)]) == 1
    (d,) = json.loads(capsys.readouterr().out)["diagnoses"]
    assert d["id"] == "npu-oom" and d["line"] == 201
