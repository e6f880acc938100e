"""IPython's own syntax in code cells: which lines are not Python.

IPython reads a line as special when its first non-blank character is ``%``
(line magic), ``!`` (shell escape), ``?`` (help), when it ends in ``?``
(``obj?``), or when an assignment's value is one (``files = !ls``,
``t = %timeit -o f()``); a cell whose first line starts with ``%%`` is a cell
magic, whose body is Python only for the magics that run it as Python
(``%%time``, ``%%timeit``, ``%%capture``...). A line ending in ``\\`` continues
a magic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Cell magics whose body IPython runs as Python.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"})
#: Cell magics whose body is a shell script.
SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script"})

_ASSIGNED = re.compile(r"^\s*[\w.\[\], ]+\s*=\s*[%!]")
_SPECIAL = re.compile(r"^\s*(?:[%!?]|\w[\w.]*\?{1,2}\s*$)")
#: Line magics that IPython also runs without their ``%`` (automagic, on by default in
#: Jupyter): ``cd ..``, ``pip install langchain`` (alpaca_farm's and llama-cookbook's
#: notebooks). A line that starts with one is IPython's only where it is not Python on
#: its own (``ls = []`` and ``pwd`` stay Python).
_AUTOMAGIC = re.compile(
    r"^\s*(?:cd|pip|conda|mamba|pwd|env|set_env|ls|cat|mkdir|rmdir|rm|cp|mv|ll|load_ext|reload_ext|matplotlib|"
    r"autoreload|aimport|run|time|timeit|who|whos|reset|history|bookmark|pushd|popd|dhist|alias)(?:\s|$)")


@dataclass(frozen=True)
class Special:
    """Lines ``first``..``last`` (0-based, inclusive) of a cell that are IPython syntax."""

    first: int
    last: int
    text: str

    @property
    def kind(self) -> str:
        stripped = self.text.lstrip()
        if stripped.startswith("!"):
            return "shell"
        if stripped.startswith("%") or _AUTOMAGIC.match(self.text):
            return "magic"
        return "assigned" if _ASSIGNED.match(self.text) else "help"


def cell_magic(lines: list[str]) -> str | None:
    """``bash`` for a cell that starts with ``%%bash``; None for a plain cell."""
    if lines and lines[0].startswith("%%"):
        name = lines[0][2:].split(None, 1)
        return name[0] if name else ""
    return None


def specials(lines: list[str]) -> list[Special]:
    """The IPython lines of a cell's code (a cell without a cell magic)."""
    found = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if _SPECIAL.match(line) or _ASSIGNED.match(line) or (_AUTOMAGIC.match(line) and not _is_python(line)):
            last = index
            while lines[last].rstrip("\r\n").endswith("\\") and last + 1 < len(lines):
                last += 1
            found.append(Special(index, last, "".join(lines[index : last + 1])))
            index = last + 1
        else:
            index += 1
    return found


def _is_python(line: str) -> bool:
    """``line`` compiles as a statement of its own (an automagic name used as Python)."""
    try:
        compile(line.strip(), "<cell>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True
