"""Which rules run on which file: ``select``, ``ignore`` and ``per-file-ignores``.

Codes are prefixes, as in ruff: ``NPU1`` selects every device rule, ``NPU`` or
``ALL`` selects everything. A rule runs when some ``select`` prefix matches it
and no ``ignore`` prefix does (``extend-select`` codes are added to ``select``
by npu_migrate/cli/options.py).

Opt-in rules (``Rule.opt_in``, such as NPU511 single device -> DDP) change what a
program does rather than which device it uses, so no prefix turns them on: they
run only when their exact code is selected (``--extend-select NPU511``), as ruff's
preview rules do under ``explicit-preview-rules``. An ``ignore`` prefix still
turns them off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch


def _normalise(codes: Iterable[str]) -> tuple[str, ...]:
    out = []
    for code in codes:
        code = code.strip().upper()
        if code:
            out.append("" if code == "ALL" else code)
    return tuple(out)


def matches(rule_id: str, prefixes: Iterable[str]) -> bool:
    return any(rule_id.startswith(p) for p in prefixes)


@dataclass(frozen=True)
class Selection:
    select: tuple[str, ...] = ("",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def create(
        cls,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        per_file_ignores: Mapping[str, Iterable[str]] | None = None,
    ) -> Selection:
        return cls(
            select=_normalise(select) if select is not None else ("",),
            ignore=_normalise(ignore or ()),
            per_file_ignores=tuple(
                (pattern, _normalise(codes)) for pattern, codes in sorted((per_file_ignores or {}).items())
            ),
        )

    def ignored_for(self, path: str) -> tuple[str, ...]:
        extra: list[str] = []
        posix = path.replace("\\", "/")
        for pattern, codes in self.per_file_ignores:
            if fnmatch(posix, pattern) or fnmatch(posix.rsplit("/", 1)[-1], pattern):
                extra.extend(codes)
        return self.ignore + tuple(extra)

    def active(self, rule_id: str, path: str = "", opt_in: bool = False) -> bool:
        """Whether ``rule_id`` runs on ``path``; an ``opt_in`` rule only when named exactly."""
        selected = rule_id in self.select if opt_in else matches(rule_id, self.select)
        return selected and not matches(rule_id, self.ignored_for(path))

    def key(self) -> str:
        return repr((self.select, self.ignore, self.per_file_ignores))
