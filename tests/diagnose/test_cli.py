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
