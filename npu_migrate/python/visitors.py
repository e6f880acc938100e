"""What every batched visitor of the engine shares (rules and the engine's own
collectors): libcst's per-instance lookup of ``visit_``/``leave_`` methods, done
once per class."""

from __future__ import annotations

import functools


@functools.cache
def _visitor_names(cls: type) -> tuple[str, ...]:
    return tuple(
        name for name in dir(cls)
        if name.startswith(("visit_", "leave_"))
        and name != "leave_file"
        and callable(getattr(cls, name))
        and not getattr(getattr(cls, name), "_is_no_op", False)
    )


class CachedVisitorLookup:
    """libcst looks a batched visitor's visit_/leave_ methods up with
    ``inspect.getmembers`` for every instance; rules are instantiated per file, so
    look them up once per class instead."""

    def get_visitors(self):
        return {name: getattr(self, name) for name in _visitor_names(type(self))}
