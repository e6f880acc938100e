"""Help text for the runtime's argparse command lines (``preflight``, ``diagnose``)
laid out like the click commands of ``npu-migrate``: ``Usage:``, a description
indented by two, ``Arguments:`` and ``Options:`` sections, then ``Examples:`` and
``Exit codes:``. The runtime keeps argparse (it depends on nothing but the standard
library); this only changes how its help reads next to ``npu-migrate --help``."""

from __future__ import annotations

import argparse
import sys
import textwrap

_TITLES = {"options": "Options", "optional arguments": "Options", "positional arguments": "Arguments"}


class ClickStyleHelp(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter with click's headings and indentation."""

    def add_usage(self, usage, actions, groups, prefix=None):  # noqa: ANN001, ANN201 - argparse's signature
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)

    def start_section(self, heading):  # noqa: ANN001, ANN201
        super().start_section(_TITLES.get(heading, heading))


class ClickStyleParser(argparse.ArgumentParser):
    """Usage errors as click prints them: the usage, a hint, ``Error: ...``, exit 2."""

    def error(self, message: str):  # noqa: ANN201 - never returns
        self.print_usage(sys.stderr)
        self.exit(2, f"Try '{self.prog} --help' for help.\n\nError: {message[:1].upper()}{message[1:]}\n")


def described(text: str, width: int = 78) -> str:
    """A description paragraph as click prints one: wrapped, indented by two."""
    return textwrap.fill(" ".join(text.split()), width=width, initial_indent="  ", subsequent_indent="  ")


def parser(prog: str | None, description: str, epilog: str, arguments: str = "") -> argparse.ArgumentParser:
    """An ArgumentParser whose help reads like the click commands' help (usage
    ``PROG [OPTIONS] ARGUMENTS``)."""
    usage = "%(prog)s [OPTIONS]" + (f" {arguments}" if arguments else "")
    return ClickStyleParser(prog=prog, usage=usage, description=described(description), epilog=epilog,
                            formatter_class=ClickStyleHelp)
