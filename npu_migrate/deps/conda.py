"""Conda ``environment.yml``: ``dependencies`` (conda match specs), its ``pip:``
sub-list (PEP 508 requirements) and ``channels``, read with PyYAML's composer.

torch-npu is on PyPI only, so it goes at the end of the ``pip:`` sub-list, on
a line of its own indented like the last item there; a flow-style list
(``[a, b]``) is not extended (the rule reports instead).
"""

from __future__ import annotations

import yaml

from npu_migrate.configs.document import decode
from npu_migrate.configs.offsets import CharToByte
from npu_migrate.configs.yaml_reader import compose
from npu_migrate.deps.model import (
    DependencyList,
    DepsDocument,
    Entry,
    IndexUrl,
    line_after,
)


def read(data: bytes) -> DepsDocument:
    text = decode(data)
    roots = compose(text)
    root = roots[0] if roots else None
    document = DepsDocument("environment.yml")
    if not isinstance(root, yaml.MappingNode):
        return document
    to_byte = CharToByte(text)

    def entry(node) -> Entry:
        start, end = to_byte(node.start_mark.index), to_byte(node.end_mark.index)
        return Entry(node.value, start, end, data.rfind(b"\n", 0, start) + 1)

    for key, value in root.value:
        if key.value == "channels" and isinstance(value, yaml.SequenceNode):
            for item in value.value:
                if isinstance(item, yaml.ScalarNode):
                    found = entry(item)
                    document.indexes.append(IndexUrl(item.value, found.start, found.end, found.statement, "conda channel"))
        if key.value != "dependencies" or not isinstance(value, yaml.SequenceNode):
            continue
        conda = DependencyList("conda dependencies", conda=True)
        for item in value.value:
            if isinstance(item, yaml.ScalarNode):
                found = entry(item)
                conda.entries.append(Entry(found.text, found.start, found.end, found.statement, conda=True))
            elif isinstance(item, yaml.MappingNode):
                for sub_key, sub_value in item.value:
                    if sub_key.value == "pip" and isinstance(sub_value, yaml.SequenceNode):
                        document.lists.append(_pip(data, document, sub_value, entry))
        document.lists.insert(0, conda)
    return document


def _pip(data: bytes, document: DepsDocument, node, entry) -> DependencyList:
    listed = DependencyList("pip list", add=_adder(data, node.flow_style))
    for item in node.value:
        if not isinstance(item, yaml.ScalarNode):
            continue
        found = entry(item)
        if found.text.startswith("-"):  # an option line: only index options matter
            parts = found.text.split(None, 1)
            if len(parts) == 2 and parts[0] in ("--index-url", "-i", "--extra-index-url", "-f", "--find-links"):
                document.indexes.append(IndexUrl(parts[1], found.start, found.end, found.statement, parts[0]))
            continue
        listed.entries.append(found)
    return listed


def _adder(data: bytes, flow: bool):
    def add(after: Entry, requirement: str) -> tuple[int, int, bytes] | None:
        prefix = data[after.statement : after.start]
        if flow or not prefix.rstrip().endswith(b"-"):
            return None  # a flow sequence, or an item that does not start its line
        return line_after(data, after.end, prefix + requirement.encode())

    return add
