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
from collections.abc import Iterable, Sequence


def _word(trigger: str) -> str:
    if trigger.endswith("*"):
        return re.escape(trigger[:-1]) + r"\w*"
    return re.escape(trigger) + r"\b"


class Prefilter:
    def __init__(self, triggers: Iterable[str | Sequence[str]]) -> None:
        singles: set[str] = set()
        groups: set[tuple[str, ...]] = set()
        for trigger in triggers:
            if isinstance(trigger, str):
                singles.add(trigger)
            elif len(trigger) == 1:
                singles.add(trigger[0])
            else:
                groups.add(tuple(sorted(trigger)))
        self._single = (
            re.compile(r"\b(?:" + "|".join(_word(w) for w in sorted(singles)) + ")") if singles else None
        )
        self._groups = [tuple(re.compile(r"\b" + _word(w)) for w in group) for group in sorted(groups)]

    def may_need(self, text: str) -> bool:
        if self._single is not None and self._single.search(text):
            return True
        return any(all(pattern.search(text) for pattern in group) for group in self._groups)
