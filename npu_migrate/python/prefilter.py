"""Decides, from words alone, whether a file can need any selected rule.

Parsing is the expensive part (about 5-6k lines per CPU-second), and in a real
repository most files never mention CUDA. Each rule declares ``triggers``: the
words (identifiers, or words inside strings) without which it cannot fire. A
file is parsed only if it contains a trigger of some selected rule.

Words are matched with ``\\b`` boundaries, so ``cuda`` does not match inside
``is_cuda`` or ``cudart``; rules list such identifiers as their own triggers. A
trigger ending in ``*`` is a prefix (``NCCL_*``). A tuple trigger needs all of its
words. ``bench/prefilter_proof.py`` checks on the real corpus that the prefilter
never skips a file that a full parse would change or report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

_WORD = re.compile(r"\w+")


def word_pattern(trigger: str) -> str:
    """The regex for one trigger word (``NCCL_*`` is a prefix)."""
    if trigger.endswith("*"):
        return re.escape(trigger[:-1]) + r"\w*"
    return re.escape(trigger) + r"\b"


def _present(trigger: str, found: set[str]) -> bool:
    if trigger.endswith("*"):
        return any(word.startswith(trigger[:-1]) for word in found)
    return trigger in found


class Prefilter:
    """Which rules can fire on a text, from the trigger words it contains.

    ``rules`` maps a rule id to its triggers. A rule without triggers always
    counts as needed when some other rule is (it depends on their fixes).
    """

    def __init__(self, rules: Mapping[str, Sequence[str | Sequence[str]]], followers: Sequence[str] = ()) -> None:
        """``followers``: rules that have triggers of their own and are also needed
        whenever any other rule is."""
        self._rules: dict[str, list[tuple[str, ...]]] = {}
        self._always: list[str] = []
        words: set[str] = set()
        for rule_id, triggers in rules.items():
            groups = [(t,) if isinstance(t, str) else tuple(t) for t in triggers]
            if rule_id in followers:
                self._always.append(rule_id)
            if not groups:
                if rule_id not in followers:
                    self._always.append(rule_id)
                continue
            self._rules[rule_id] = groups
            words.update(w for group in groups for w in group)
        # Plain identifiers are looked up in the set of the text's words (one C-level
        # scan); the few others (prefixes, `nvidia-smi`) get a regex, run only when
        # their literal part occurs at all.
        self._plain = frozenset(w for w in words if _WORD.fullmatch(w))
        self._special = [(w.rstrip("*"), re.compile(r"\b" + word_pattern(w))) for w in sorted(words - self._plain)]

    def words_in(self, text: str) -> set[str]:
        """The trigger words in ``text``, matched on word boundaries (a prefix trigger
        gives the whole word it starts)."""
        found = set(self._plain.intersection(_WORD.findall(text)))
        for literal, pattern in self._special:
            if literal in text:
                found.update(pattern.findall(text))
        return found

    def rules_needed(self, text: str) -> list[str]:
        """Rule ids that may fire on ``text`` (empty: the file cannot need a change)."""
        found = self.words_in(text)
        if not found:
            return []
        needed = [
            rule_id
            for rule_id, groups in self._rules.items()
            if any(all(_present(word, found) for word in group) for group in groups)
        ]
        return needed + [r for r in self._always if r not in needed] if needed else []

    def may_need(self, text: str) -> bool:
        return bool(self.rules_needed(text))
