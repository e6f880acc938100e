"""Every signature is found in a log in its real shape, nothing in a healthy log, and
the root cause comes first."""

from __future__ import annotations

import io

import pytest

from npu_runtime.diagnose import SIGNATURES, diagnose_lines
from npu_runtime.diagnose.signatures import by_id

from .excerpts import EXCERPTS, HEALTHY

CASES = [(sid, i, text) for sid, texts in EXCERPTS.items() for i, text in enumerate(texts)]


def test_every_signature_has_an_excerpt_and_sources():
    assert {s.id for s in SIGNATURES} == set(EXCERPTS)
    for s in SIGNATURES:
        assert s.sources and s.action and s.meaning
        assert s.severity in {"error", "warning"}


@pytest.mark.parametrize(("sid", "index", "text"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_excerpt_is_diagnosed_as_its_signature(sid, index, text):
    diagnoses = diagnose_lines([("rank.log", io.StringIO(text))])
    assert diagnoses, f"nothing found in {text!r}"
    assert diagnoses[0].signature.id == sid
    # The reported line holds the evidence.
    lines = text.splitlines()
    assert by_id(sid).match(lines[diagnoses[0].line - 1])


def test_healthy_log_gives_nothing():
    assert diagnose_lines([("train.log", io.StringIO("".join(HEALTHY)))]) == []


def test_root_cause_comes_first_and_consequences_follow():
    # An ECC error on rank 3, then the HCCL timeouts it causes on every rank.
    log = (
        EXCERPTS["hccl-exec-timeout"][0] * 3
        + EXCERPTS["hbm-ecc"][0]
        + EXCERPTS["hccl-connect-timeout"][0]
    )
    ids = [d.signature.id for d in diagnose_lines([("job.log", io.StringIO(log))])]
    assert ids[0] == "hbm-ecc"
    assert set(ids[1:]) == {"hccl-exec-timeout", "hccl-connect-timeout"}


def test_each_signature_is_reported_once_with_its_count_and_first_line():
    log = "ok\n" + EXCERPTS["npu-oom"][1] * 4
    (diagnosis,) = diagnose_lines([("a.log", io.StringIO(log))])
    assert (diagnosis.line, diagnosis.count) == (2, 4)


def test_restart_decisions_follow_the_failure_class():
    assert by_id("hbm-ecc").restart and by_id("device-link-lost").restart
    assert not by_id("npu-oom").restart and not by_id("aicore-exception").restart
    assert not by_id("cann-not-set").restart and not by_id("nccl-backend").restart
    assert by_id("hccl-connect-timeout").restart and by_id("watchdog-hang").restart


def test_a_huge_line_is_matched_in_bounded_time():
    line = "x" * 5_000_000 + " NPU out of memory\n"
    # The signature lies past MAX_LINE: not matched, and no time spent on the rest.
    assert diagnose_lines([("big.log", io.StringIO(line))]) == []
