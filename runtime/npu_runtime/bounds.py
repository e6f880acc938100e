"""One parser for every integer the runtime reads from the environment or a ranktable.

A launcher's variables are strings anyone can set: ``int()`` of a 5000-digit string
raises ``ValueError: Exceeds the limit (4300 digits)``, accepts other scripts' digits
("٣") and underscores ("1_0"), and a rank of 10**30 is no rank. :func:`bounded_int`
accepts an optional sign and ASCII digits only, at most :data:`MAX_DIGITS` of them,
within ``[minimum, maximum]``; anything else is a :class:`BoundError` (a LaunchError)
naming the variable. :func:`bounded_list` does the same for list-valued variables
(``NPU_RUNTIME_HOST_IP``, ``VC_WORKER_HOSTS``): at most :data:`MAX_LIST` entries of at
most :data:`MAX_ITEM` characters, checked before the value is split.
"""

from __future__ import annotations

import re

from .errors import LaunchError

#: no value the runtime reads needs more (ports, ranks, device ids, seconds)
MAX_DIGITS = 12
#: ranks, world sizes and device ids above this are not real (the largest jobs have ~1e5 ranks)
MAX_INT = 10**9
MAX_LIST = 1024
MAX_ITEM = 255
_INT_RE = re.compile(r"[+-]?[0-9]+")  # ASCII only: int() also accepts other scripts' digits


class BoundError(LaunchError):
    """A value out of bounds or not an integer; the message names the variable."""


def shown(raw: object) -> str:
    """``raw`` for a message: its repr, cut short when long."""
    text = repr(raw)
    return text if len(text) <= 42 else f"{text[:22]}... ({len(str(raw))} characters)"


def bounded_int(raw: object, name: str, *, minimum: int = 0, maximum: int = MAX_INT,
                where: str = "") -> int | None:
    """``raw`` (a string, or an int from a JSON ranktable) as an int in
    ``[minimum, maximum]``; None when ``raw`` is None or blank. BoundError otherwise."""
    suffix = f" ({where})" if where else ""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise BoundError(f"{name}={raw!r} is not an integer{suffix}")
    if isinstance(raw, int):
        value = raw
    else:
        text = raw.strip()
        if not text:
            return None
        if len(text) > MAX_DIGITS + 1 or not _INT_RE.fullmatch(text):
            raise BoundError(f"{name}={shown(raw)} is not an integer of at most {MAX_DIGITS} digits{suffix}")
        value = int(text)
    if value < minimum:
        raise BoundError(f"{name}={shown(str(raw))} must be >= {minimum}{suffix}")
    if value > maximum:
        raise BoundError(f"{name}={shown(str(raw))} must be <= {maximum}{suffix}")
    return value


def bounded_list(raw: str | None, name: str, *, sep: str = ",", max_items: int = MAX_LIST,
                 max_item: int = MAX_ITEM) -> list[str]:
    """The non-blank entries of a separated list; BoundError when there are more than
    ``max_items`` or one is longer than ``max_item`` (checked before splitting)."""
    if raw is None or not raw.strip():
        return []
    if len(raw) > max_items * (max_item + 1 + 8):  # + separators and spaces
        raise BoundError(f"{name} is {len(raw)} characters long: more than {max_items} entries")
    items = [item.strip() for item in raw.split(sep) if item.strip()]
    if len(items) > max_items:
        raise BoundError(f"{name} lists {len(items)} entries; at most {max_items} are accepted")
    for item in items:
        if len(item) > max_item:
            raise BoundError(f"{name} has an entry of {len(item)} characters (at most {max_item})")
    return items
