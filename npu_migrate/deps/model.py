"""What every dependency-file reader hands the rules, whatever the format."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.requirements import Requirement

from npu_migrate.deps import pairing


@dataclass(frozen=True)
class Entry:
    """One requirement: ``text`` is written at ``start:end`` (bytes; with its quotes in
    TOML and YAML, without comments and per-line options); ``statement`` is where
    its line starts."""

    text: str
    start: int
    end: int
    statement: int
    #: Conda match spec (``pytorch=2.1``) rather than a PEP 508 requirement.
    conda: bool = False
    #: How the file writes it, when ``text`` is a translation (Poetry's ``torch = "^2.1"``).
    written: str = ""

    @property
    def shown(self) -> str:
        """The entry as messages quote it."""
        return self.written or self.text

    @functools.cached_property
    def requirement(self) -> Requirement | None:
        # Parsed once per entry: rules compare every entry with the others (markers), and
        # parsing again each time made a 100 KB requirements file take 45 s (round 5).
        return None if self.conda else pairing.parse(self.text)

    @property
    def name(self) -> str | None:
        if self.conda:
            spec = pairing.conda_requirement(self.text)
            return spec[0] if spec else None
        requirement = self.requirement
        return pairing.name_of(requirement) if requirement else None

    @property
    def specifier(self) -> str:
        if self.conda:
            spec = pairing.conda_requirement(self.text)
            return spec[1] if spec else ""
        requirement = self.requirement
        return str(requirement.specifier) if requirement else ""

    @property
    def is_torch(self) -> bool:
        return self.name == "pytorch" if self.conda else self.name == pairing.TORCH


#: ``add(after, requirement_text)`` -> ``(start, end, new bytes)``: the edit that adds a
#: requirement after ``after`` in the list's own style; None (or why, as a string) when
#: the list's style cannot take one safely (the rule reports instead).
Adder = Callable[[Entry, str], "tuple[int, int, bytes] | str | None"]


def line_after(data: bytes, offset: int, text: bytes) -> tuple[int, int, bytes]:
    """The edit that puts ``text`` on a line of its own after the line holding
    ``offset``, with that line's line ending (the file's, at its end)."""
    line_end = data.find(b"\n", offset)
    if line_end == -1:  # the last line, without a line break
        newline = b"\r\n" if b"\r\n" in data else b"\n"
        return len(data), len(data), newline + text
    newline = b"\r\n" if data[line_end - 1 : line_end] == b"\r" else b"\n"
    return line_end + 1, line_end + 1, text + newline


@dataclass
class DependencyList:
    #: Where the list is, for messages: ``requirements``, ``[project] dependencies``...
    where: str
    entries: list[Entry] = field(default_factory=list)
    add: Adder | None = None
    #: Conda's own packages (not pip's): torch-npu goes into the pip sub-list.
    conda: bool = False
    #: A requirement as this list writes it (Poetry: ``torch-npu = "2.1.*"``), for messages.
    written: Callable[[str], str] | None = None


@dataclass(frozen=True)
class IndexUrl:
    """A package index or a URL requirement: ``--extra-index-url URL``, a
    ``[[tool.uv.index]] url``, ``torch @ https://...``, a conda channel."""

    url: str
    start: int
    end: int
    statement: int
    what: str


@dataclass
class DepsDocument:
    format: str
    lists: list[DependencyList] = field(default_factory=list)
    indexes: list[IndexUrl] = field(default_factory=list)
    #: The comment marker (``#``) for suppression comments and ``--annotate``.
    comment: bytes | None = b"#"
    #: Why entries must not be added here (a pip-compile output, hashes), if so.
    no_additions: str | None = None
    #: Byte ranges of strings (or lines) in which a ``#`` is not a comment.
    strings_with_marks: list[tuple[int, int]] = field(default_factory=list)
