"""``setup.cfg``: ``[options] install_requires`` and ``[options.extras_require]``.

The file is parsed with ``configparser`` (setuptools' own reader); the values
it returns, one requirement per line, are then found on the lines of their
option in the text, in order, to get their positions. A requirement is added on
a line of its own after torch's, with the same indentation and line ending; a
value written on the option's own line (``install_requires = torch==2.1``) is
not extended (the rule reports instead).
"""

from __future__ import annotations

import collections
import configparser
import re

from npu_migrate.configs.document import ReadError, decode
from npu_migrate.deps.model import DependencyList, DepsDocument, Entry, line_after
from npu_migrate.pipeline import limits

_SECTION = re.compile(rb"^\[([^\]]+)\]")
_OPTION = re.compile(rb"^([A-Za-z0-9_.\-]+)\s*[=:]")
#: setuptools drops `` # comment`` after a requirement (pkg_resources' ``drop_comment``).
_COMMENT = re.compile(r"\s+#.*$")


def read(data: bytes) -> DepsDocument:
    limits.check(data, "ini")  # the size limit (LimitError): npu_migrate/pipeline/limits.py
    from npu_migrate.deps.engine import (  # the engine imports this reader
        check_count,
        check_lines,
    )

    check_lines(data)  # before configparser (7 us a line: 32 MB of short lines took 45 s)
    text = decode(data)
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise ReadError(getattr(exc, "lineno", 1) or 1, f"not a valid setup.cfg: {str(exc).splitlines()[0]}") from None
    wanted = {("options", "install_requires"): "[options] install_requires"}
    if parser.has_section("options.extras_require"):
        for option in parser.options("options.extras_require"):
            wanted[("options.extras_require", option)] = f"[options.extras_require] {option}"
    document = DepsDocument("setup.cfg")
    count = 0
    for (section, option), where in wanted.items():
        if not parser.has_option(section, option):
            continue
        values = [_COMMENT.sub("", v).strip() for v in parser.get(section, option).splitlines()]
        values = [v for v in values if v and not v.startswith("#")]
        count += len(values)
        check_count(count)  # before _find walks the whole file once per option
        listed = _find(data, section, option, values, where)
        if listed is not None:
            document.lists.append(listed)
    return document


def _lines(data: bytes):
    offset = 0
    for line in data.splitlines(keepends=True):
        yield offset, line
        offset += len(line)


def _find(data: bytes, section: str, option: str, values: list[str], where: str) -> DependencyList | None:
    current = None
    inside = False
    listed = DependencyList(where, add=_adder(data))
    pending = collections.deque(values)  # popped from the left once per value: list.pop(0) made this quadratic
    for offset, line in _lines(data):
        body = line.rstrip(b"\r\n")
        match = _SECTION.match(body)
        if match:
            current = match.group(1).decode("utf-8", "replace").strip()
            inside = False
            continue
        option_match = _OPTION.match(body)
        if option_match and not body[:1].isspace():
            inside = current == section and option_match.group(1).decode().lower() == option
            if inside:
                rest = body[option_match.end():]
                value = _COMMENT.sub("", rest.decode("utf-8", "replace")).strip().encode()
                if value and pending and value.decode("utf-8", "replace") == pending[0]:
                    start = offset + option_match.end() + rest.index(value)
                    # On the option's own line: found, but nothing is added after it.
                    listed.entries.append(Entry(pending.popleft(), start, start + len(value), offset))
            continue
        if not inside or not pending:
            continue
        value = _COMMENT.sub("", body.decode("utf-8", "replace")).strip().encode()
        if value and value.decode("utf-8", "replace") == pending[0]:
            start = offset + body.index(value)
            listed.entries.append(Entry(pending.popleft(), start, start + len(value), offset))
    return listed if listed.entries else None


def _adder(data: bytes):
    def add(after: Entry, requirement: str) -> tuple[int, int, bytes] | None:
        indent = data[after.statement : after.start]
        if indent.strip(b" \t") or not indent:
            return None  # the value is on the option's own line
        return line_after(data, after.end, indent + requirement.encode())

    return add
