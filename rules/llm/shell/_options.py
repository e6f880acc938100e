"""Shared by the LLM shell rules: the options of training command lines (also in
argument arrays and option strings), and removing one option with its value so
that the line, its continuation and its neighbours stay as they were."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from npu_migrate.rules.shell._arguments import (
    array_words,
    launch_words,
    option_string_words,
)

from npu_migrate.shell import syntax
from npu_migrate.shell.rule import ShellRule

_TRUE = frozenset({"true", "1", "yes"})


@dataclass(frozen=True)
class Option:
    """``--name value`` / ``--name=value`` / a bare ``--name`` among training arguments."""

    name: str  # "--tf32"
    word: syntax.Arg  # the option word
    value: syntax.Arg | None  # the separate value word (None: `--name=value` or bare)
    text: str | None  # the value's text (None: bare flag)

    @property
    def truthy(self) -> bool:
        """What HfArgumentParser reads as True: a bare flag or true/1/yes."""
        return self.text is None or self.text.strip("\"'").lower() in _TRUE


def words_of(node) -> list[syntax.Arg] | None:
    """Training arguments held by ``node``: a command that launches training, an
    array, or an option string assigned to a variable."""
    if node.type == "command":
        return launch_words(node)
    if node.type == "array":
        return array_words(node)
    if node.type == "variable_assignment":
        value = node.child_by_field_name("value")
        return option_string_words(value) if value is not None else None
    return None


def options(words: list[syntax.Arg]) -> Iterator[Option]:
    for index, word in enumerate(words):
        text = word.text
        if not text.startswith("--"):
            continue
        if "=" in text:
            name, _, value = text.partition("=")
            yield Option(name, word, None, value)
            continue
        following = words[index + 1] if index + 1 < len(words) else None
        if following is not None and not following.text.startswith("-"):
            yield Option(text, word, following, following.text)
        else:
            yield Option(text, word, None, None)


def _bounds(word: syntax.Arg) -> tuple[int, int] | None:
    """File offsets of a whole word: its node when the node is the word (quotes
    included), else its literal pieces (a word of an option string)."""
    node = word.node
    if node.text.decode("utf-8", "replace").strip("\"'") == word.text.strip("\"'"):
        return node.start_byte, node.end_byte
    if not word.static:
        return None
    return word.pieces[0].start, word.pieces[-1].start + len(b"".join(p.text for p in word.pieces))


def removal(data: bytes, option: Option, values: set[str] | None = None) -> tuple[int, int] | None:
    """The byte range to delete for ``option`` (and its value word): the whole line
    when the option is all its line holds (``    --tf32 True \\``), else the option
    and the blanks after it (or before it, at the end of a line)."""
    first = _bounds(option.word)
    last = _bounds(option.value) if option.value is not None else first
    if first is None or last is None:
        return None
    start, end = first[0], last[1]
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", end)
    line_end = len(data) if line_end < 0 else line_end
    before, after = data[line_start:start], data[end:line_end]
    rest = after.rstrip(b"\r").strip(b" \t")
    if not before.strip(b" \t") and rest in (b"\\", b""):
        if rest == b"\\":
            return line_start, min(len(data), line_end + 1)  # the whole continuation line
        # last word of a command on a line of its own: the previous line's `\` goes too
        previous = data.rfind(b"\\", 0, line_start)
        if previous >= 0 and not data[previous + 1 : line_start].strip(b" \t\r\n"):
            cut = previous
            while cut > 0 and data[cut - 1 : cut] in (b" ", b"\t"):
                cut -= 1
            return cut, end
        return None
    if after[:1] in (b" ", b"\t") and rest not in (b"\\", b""):
        stop = end
        while data[stop : stop + 1] in (b" ", b"\t"):
            stop += 1
        return start, stop
    cut = start
    while cut > line_start and data[cut - 1 : cut] in (b" ", b"\t"):
        cut -= 1
    return cut, end


class OptionsRule(ShellRule):
    """Base of the rules that read training options wherever a launcher spells them:
    a command line, an array of arguments (``ARGS=(...)``), a variable assignment."""

    def _check(self, node) -> None:
        raise NotImplementedError

    def visit_command(self, node) -> None:
        self._check(node)

    def visit_array(self, node) -> None:
        self._check(node)

    def visit_variable_assignment(self, node) -> None:
        self._check(node)
