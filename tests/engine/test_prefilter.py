"""The prefilter finds exactly the trigger words a plain word-boundary regex finds."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.registry import rules_for
from npu_migrate.python.prefilter import Prefilter, word_pattern

ROOT = Path(__file__).resolve().parents[2]
TRIGGERS = {rid: rule.triggers for rid, rule in rules_for("python").items()}
PREFILTER = Prefilter(TRIGGERS)
WORDS = sorted({w for ts in TRIGGERS.values() for t in ts for w in ([t] if isinstance(t, str) else t)})
# The reference: one alternation, longest first, every word on a word boundary.
REFERENCE = re.compile(r"\b(?:" + "|".join(word_pattern(w) for w in sorted(WORDS, key=len, reverse=True)) + ")")


def test_every_kind_of_trigger_is_present():
    assert any(w.endswith("*") for w in WORDS) and "nvidia-smi" in WORDS and "cuda" in WORDS


def test_fixtures_and_sources():
    for path in sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "rules").rglob("*.py")):
        text = path.read_text()
        assert PREFILTER.words_in(text) == set(REFERENCE.findall(text)), path


pieces = st.sampled_from([*WORDS, *(w.rstrip("*") + "X" for w in WORDS), "is_", "_", ".", "-", " ", "\n", "(", "'",
                          "x", "1", "é", "NCCL_", "cuda9", "torch_npu"])


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, max_size=30).map("".join))
def test_random_text(text):
    assert PREFILTER.words_in(text) == set(REFERENCE.findall(text))


def test_words_on_boundaries_only():
    assert PREFILTER.words_in("x.is_cuda and cudart and NCCL_DEBUG and nvidia-smi -L") == {"is_cuda", "NCCL_DEBUG", "nvidia-smi"}


def test_a_follower_runs_with_any_other_rule_and_on_its_own_words():
    prefilter = Prefilter({"A": ("cuda",), "B": ("nccl",), "F": ("npu",)}, followers=["F"])
    assert prefilter.rules_needed("backend = 'nccl'") == ["B", "F"]
    assert prefilter.rules_needed("x.npu()") == ["F"]
    assert prefilter.rules_needed("x.cuda() and x.npu()") == ["A", "F"]
    assert prefilter.rules_needed("nothing here") == []
