"""Every rule's before/after fixtures, negative cases and documentation examples."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.filetypes import named
from npu_migrate.pipeline.registry import all_rules
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings

from .golden import cases, expected_findings, migrate, migrate_file

CASES = cases()
#: the rules the engine applies over the others' edits (rules/core/): their fixtures and
#: examples run with every rule selected, and their own edits are other rules' held back
ENGINE_APPLIED = tuple(rid for rid, rule in all_rules().items() if rule.__module__.split(".")[-2] == "core")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture_output(case):
    settings = case.settings()
    result = migrate(case.before, settings)
    if case.after is None:
        assert result.new_source is None, "a negative fixture must stay byte-identical"
        assert result.fixes == []
    else:
        assert case.after.exists(), f"missing {case.after.name}"
        assert result.new_source is not None, "expected a change"
        assert result.new_source == case.after.read_bytes()
        assert any(f.rule == case.rule for f in result.fixes) or case.rule in (*ENGINE_APPLIED, "NPU800")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture_findings(case):
    result = migrate(case.before, case.settings())
    got = {(f.line, f.rule) for f in result.findings}
    assert got == expected_findings(case.before.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", [c for c in CASES if c.after is not None], ids=lambda c: c.id)
def test_fixture_idempotent(case):
    """Running on the expected output changes nothing more."""
    result = migrate(case.after, case.settings())
    assert result.new_source is None
    assert result.fixes == []


def _compiles(path) -> bool:
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize("case", [c for c in CASES if c.after is not None and c.after.suffix == ".py"
                                  and _compiles(c.before)], ids=lambda c: c.id)
def test_fixture_output_compiles_where_its_input_does(case):
    """A rewrite never turns code this interpreter (3.10 or 3.11 in CI: before PEP 701)
    compiles into code it does not: an f-string field holding its own quote, say."""
    compile(case.after.read_bytes(), str(case.after), "exec", dont_inherit=True)


def test_every_rule_has_fixtures():
    with_fixtures = {c.rule for c in CASES}
    missing = [rid for rid in all_rules() if rid not in with_fixtures]
    assert missing == []


def test_every_fixable_rule_has_a_positive_and_a_negative_fixture():
    for rid, rule in all_rules().items():
        kinds = {c.after is None for c in CASES if c.rule == rid}
        if rule.fixable and rid not in ("NPU100",):
            assert kinds == {True, False}, f"{rid} needs both a before/after pair and an unchanged case"


RULE_EXAMPLES = [(rid, i, ex) for rid, rule in all_rules().items() for i, ex in enumerate(rule.examples)]


@pytest.mark.parametrize("rid,index,example", RULE_EXAMPLES, ids=[f"{r}-{i}" for r, i, _ in RULE_EXAMPLES])
def test_documented_examples(rid, index, example):
    """The examples shown by `npu-migrate rules ID` are true."""
    codes = ["ALL"] if rid in ENGINE_APPLIED else [rid, "NPU100", *example.also]
    settings = Settings(selection=Selection.create(codes))
    example_name = named(all_rules()[rid].front_end).example_name
    result = migrate_file(example_name, example.before.encode(), settings)
    assert result.error is None
    if example.after is None:
        assert result.new_source is None
    else:
        assert result.new_source is not None and result.new_source.decode() == example.after


def test_rule_metadata():
    for rid, rule in all_rules().items():
        assert rid.startswith("NPU") and len(rid) == 6 and rid[3:].isdigit()
        assert rule.name and rule.name == rule.name.lower() and " " not in rule.name
        assert rule.summary and "\n" not in rule.summary
        assert rule.rationale.strip(), f"{rid} needs a rationale"
        assert rule.examples, f"{rid} needs examples"
