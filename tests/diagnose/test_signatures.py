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


def test_every_regex_has_a_required_literal_that_its_excerpts_contain():
    # The scan runs a regex only on lines holding its literal: a literal that a real match
    # can lack would hide the signature. Every excerpt line a regex matches holds it.
    for signature in SIGNATURES:
        for regex, literal in zip(signature.regexes, signature.literals):
            assert literal is not None, regex.pattern  # all of ours have one; none is cheaper
            text, ignore_case = literal
            for excerpt in EXCERPTS[signature.id]:
                for line in excerpt.splitlines():
                    if regex.search(line):
                        assert text in (line.lower() if ignore_case else line), (regex.pattern, line)


def test_required_literal_reads_the_top_level_run_only():
    import re

    from npu_runtime.diagnose.signatures import required_literal

    assert required_literal(re.compile(r"\bEI0006\b")) == ("EI0006", False)
    assert required_literal(re.compile(r"(?i)Getting socket times out")) == ("getting socket times out", True)
    # Inside an alternative or an optional group a literal is not required: not used.
    assert required_literal(re.compile(r"(?:abcdef|xyz)gh")) is None
    assert required_literal(re.compile(r"lib(?:hccl|acl)\.so")) == ("lib", False)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = [line for texts in EXCERPTS.values() for text in texts for line in text.splitlines()] + HEALTHY


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=30)), min_size=1, max_size=4),
       st.booleans())
def test_the_literal_prefilter_never_changes_a_match(parts, upper):
    line = " ".join(parts).replace("\n", " ")
    if upper:
        line = line.upper()
    for signature in SIGNATURES:
        assert signature.match(line) == any(r.search(line) for r in signature.regexes), (signature.id, line)
