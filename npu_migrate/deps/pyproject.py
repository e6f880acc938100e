"""``pyproject.toml``: ``[project] dependencies``, ``[project.optional-dependencies]``
and ``[dependency-groups]`` (PEP 735), read and extended with tomlkit; and Poetry's
``[tool.poetry.dependencies]`` tables (also ``dev-dependencies`` and
``[tool.poetry.group.<name>.dependencies]``), whose constraints (``^2.1``, ``~2.1.0``)
poetry-core translates to PEP 440 so the rules see them as requirements.

Positions come from the TOML reader of the config front end
(:func:`npu_migrate.configs.toml_reader.locate`). A requirement is added with
tomlkit's own ``Array.insert`` (on a copy of the array) (which follows the array's layout: one line
each with the same indentation, or inline), in the quotes torch's entry uses;
the edit is the bytes tomlkit inserted, so every other byte stays.
"""

from __future__ import annotations

import copy
import re

from npu_migrate.configs import toml_reader
from npu_migrate.configs.document import decode
from npu_migrate.configs.offsets import CharToByte
from npu_migrate.deps.model import (
    DependencyList,
    DepsDocument,
    Entry,
    IndexUrl,
    line_after,
)
from npu_migrate.pipeline.requirements import poetry_requirement, poetry_tables
from npu_migrate.tables.packages import CUDA_INDEX_URL


def _arrays(document):
    """``(where, container, key)`` of every dependency array."""
    from tomlkit.items import Array

    project = document.get("project", {})
    if isinstance(project.get("dependencies"), Array):
        yield "[project] dependencies", project, "dependencies"
    for group, value in project.get("optional-dependencies", {}).items():
        if isinstance(value, Array):
            yield f"[project.optional-dependencies] {group}", project["optional-dependencies"], group
    for group, value in document.get("dependency-groups", {}).items():
        if isinstance(value, Array):
            yield f"[dependency-groups] {group}", document["dependency-groups"], group


def read(data: bytes) -> DepsDocument:
    from tomlkit.items import String

    text = decode(data)
    document = toml_reader.parse(text)
    to_byte = CharToByte(text)
    result = DepsDocument("pyproject.toml")
    leaves = [leaf for leaf in toml_reader.leaves(document) if isinstance(toml_reader._item(*leaf[:2]), String)]
    spans = dict(zip(((id(c), k) for c, k, _ in leaves), toml_reader.locate(document, text, leaves), strict=True))

    def span(container, key) -> tuple[int, int]:
        start, end = spans[(id(container), key)]
        return to_byte(start), to_byte(end)

    def statement(offset: int) -> int:
        return data.rfind(b"\n", 0, offset) + 1

    for container, key, _ in leaves:
        value = str(toml_reader._item(container, key))
        if "://" in value and CUDA_INDEX_URL.search(value):
            start, end = span(container, key)
            result.indexes.append(IndexUrl(value, start, end, statement(start), "index URL"))
        if "npu-migrate" in value:
            result.strings_with_marks.append(span(container, key))
    arrays = list(_arrays(document))
    array_spans = toml_reader.locate(document, text, [(c, k, ()) for _, c, k in arrays]) if arrays else []
    for (where, container, key), (start, end) in zip(arrays, array_spans, strict=True):
        array = container[key]
        listed = DependencyList(where, add=_adder(array, text[start:end], to_byte(start)))
        for index in range(len(array)):
            if (id(array), index) in spans:
                begin, finish = span(array, index)
                listed.entries.append(Entry(str(array[index]), begin, finish, statement(begin)))
        result.lists.append(listed)
    for where, table in poetry_tables(document):
        listed = DependencyList(where, add=_poetry_adder(data), written=_poetry_line)
        for name, value in table.items():
            requirement, leaf = poetry_requirement(table, name, value)
            if requirement is not None and (id(leaf[0]), leaf[1]) in spans:
                begin, finish = span(*leaf)
                written = f"{name} = {data[begin:finish].decode()}"
                listed.entries.append(Entry(requirement, begin, finish, statement(begin), written=written))
        result.lists.append(listed)
    return result


_POETRY_LINE = re.compile(rb"[ \t]*(?P<key>[A-Za-z0-9_.\-]+|\"[^\"\n]*\"|'[^'\n]*')[ \t]*=[ \t]*")


def _poetry_line(requirement: str, quote: str = '"') -> str:
    """``torch-npu==2.1.*; marker`` as a Poetry table line (``torch-npu = "2.1.*"``)."""
    from packaging.requirements import Requirement

    parsed = Requirement(requirement)
    version = f"{quote}{str(parsed.specifier).removeprefix('==')}{quote}"
    if parsed.marker is not None:
        marker = str(parsed.marker)
        marker = f"'{marker}'" if '"' in marker else f'"{marker}"'  # packaging writes "linux"
        version = f"{{version = {version}, markers = {marker}}}"
    return f"{parsed.name} = {version}"


_OPTIONAL = re.compile(rb"\boptional[ \t]*=[ \t]*true\b")


def _poetry_adder(data: bytes):
    """Add ``torch-npu = "2.1.*"`` on a line of its own after torch's line, with its
    indentation, spacing and quotes; only when torch's entry is that one line."""

    def add(after: Entry, requirement: str) -> tuple[int, int, bytes] | str | None:
        line_end = data.find(b"\n", after.start)
        line = data[after.statement : len(data) if line_end == -1 else line_end]
        match = _POETRY_LINE.match(line)
        if match is None or after.end > after.statement + len(line.rstrip(b"\r")):
            return None  # a value on lines of its own, or not `torch = ...`: the rule reports instead
        if _OPTIONAL.search(line):
            return "torch is optional here (an extra): torch-npu belongs in the same extra"
        quote = data[after.start : after.start + 1].decode()
        name, _, value = _poetry_line(requirement, quote).partition(" = ")
        indent = line[: len(line) - len(line.lstrip(b" \t"))]
        separator = line[match.end("key") : match.end()]
        return line_after(data, after.start, indent + name.encode() + separator + value.encode())

    return add


def _adder(array, original: str, array_start: int):
    from tomlkit.items import String, StringType

    def add(after: Entry, requirement: str) -> tuple[int, int, bytes] | None:
        index = next((i for i, item in enumerate(array) if str(item) == after.text), None)
        if index is None:
            return None
        kind = getattr(array[index], "type", StringType.SLB)
        kind = kind if kind in (StringType.SLB, StringType.SLL) else StringType.SLB
        extended = copy.deepcopy(array)
        if extended.as_string() != original:
            return None  # tomlkit would not reproduce the array: do not touch it
        extended.insert(index + 1, String.from_raw(requirement, kind))
        new = extended.as_string()
        prefix = 0
        while prefix < len(original) and original[prefix] == new[prefix]:
            prefix += 1
        suffix = 0
        while suffix < len(original) - prefix and original[-1 - suffix] == new[-1 - suffix]:
            suffix += 1
        inserted = new[prefix : len(new) - suffix]
        at = array_start + len(original[:prefix].encode())
        return at, at, inserted.encode()

    return add
