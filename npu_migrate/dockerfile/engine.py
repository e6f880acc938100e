"""Migrates one Dockerfile: the Dockerfile rules on the instructions, the shell
rules on ``RUN``/``CMD``/``ENTRYPOINT``/``ENV`` (see ``npu_migrate/dockerfile/__init__.py``),
then the shared byte-edit machinery (``npu_migrate/pipeline/edits.py``).

Suppression: Dockerfile comments stand on lines of their own, so a
``# npu-migrate: ignore[...]`` comment covers the whole instruction below it
(hadolint's ``# hadolint ignore=`` convention); inside a ``RUN <<EOF`` script,
shell comments work as in a launcher. ``--annotate`` puts its comments above
the instruction.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from npu_migrate.dockerfile.parser import parse
from npu_migrate.pipeline import limits, treewalk
from npu_migrate.pipeline.edits import Recorder, finish
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import Suppressions
from npu_migrate.shell import engine as shell

if TYPE_CHECKING:
    from tree_sitter import Node

_SHELL_COMMANDS = {"run_instruction", "cmd_instruction", "entrypoint_instruction"}
_ESCAPE = re.compile(rb"#\s*escape\s*=\s*(\S)")
_POSIX_SHELLS = {"sh", "bash", "dash", "ash"}


class DockerfileFile:
    def __init__(self, data: bytes, root: Node, recorder: Recorder) -> None:
        self.data = data
        self.root = root
        self.recorder = recorder

    def instruction_start(self, node: Node) -> int:
        """The start of the instruction that holds ``node`` (a comment line may go above it)."""
        while node.parent is not None and node.parent.type != "source_file":
            node = node.parent
        return node.start_byte


def migrate(path: str, data: bytes, settings: Settings) -> FileResult:
    result = FileResult(path=path)
    docker_rules = [cls for rid, cls in rules_for("dockerfile").items()
                    if settings.selection.active(rid, path) and cls.triggered(data)]
    shell_rules = [cls for cls in shell.active_rules(path, settings).values() if cls.triggered(data)]
    if not docker_rules and not shell_rules:
        return result
    limits.check(data, "dockerfile")  # size and nesting first (LimitError): npu_migrate/pipeline/limits.py
    tree = parse(data)
    recorder = Recorder()
    suppressions = Suppressions()
    file = DockerfileFile(data, tree.root_node, recorder)
    visitors = [cls(file) for cls in docker_rules]
    treewalk.walk(tree, treewalk.handlers(visitors))
    for visitor in visitors:
        visitor.leave_file()
    if shell_rules:
        _shell_parts(path, data, tree.root_node, settings, recorder, suppressions, file)
    _suppressions(tree.root_node, suppressions)
    return finish(result, data, recorder, settings, suppressions)


def _shell_parts(path, data, root, settings, recorder, suppressions, file) -> None:
    escape = _ESCAPE.match(data.lstrip(b"\xef\xbb\xbf"))
    if escape is not None and escape.group(1) != b"\\":
        return  # continuation lines end with another character: not shell syntax
    posix = True
    for instruction in root.named_children:
        kind = instruction.type
        if kind == "shell_instruction":
            program = instruction.named_children[0].text if instruction.named_children else b""
            posix = any(f"/{name}\"".encode() in program or f"\"{name}\"".encode() in program
                        for name in _POSIX_SHELLS)
            continue
        if not posix and kind in _SHELL_COMMANDS:
            continue
        for ranges, variables in _shell_ranges(instruction):
            if ranges or variables:
                source = _exec_form_as_shell(data, instruction) if kind in _SHELL_COMMANDS else data
                shell.scan(path, source, settings, recorder, suppressions, ranges or [(0, 0)],
                           statement_of=file.instruction_start, variables=variables)


def _exec_form_as_shell(data: bytes, instruction: Node) -> bytes:
    """The file with the JSON punctuation of an exec-form command (``["python", "-m", "x"]``)
    blanked out: what is left, ``"python"  "-m"  "x"``, is the same command line in
    shell syntax at the same byte offsets (JSON strings are double-quoted like shell
    words)."""
    array = next((c for c in instruction.named_children if c.type == "json_string_array"), None)
    if array is None:
        return data
    out = bytearray(data)
    for child in array.children:
        if child.type in ("[", "]", ","):
            out[child.start_byte : child.end_byte] = b" " * (child.end_byte - child.start_byte)
    return bytes(out)


def _shell_ranges(instruction: Node) -> list[tuple[list[tuple[int, int]], list[Node]]]:
    """The pieces of one instruction to parse as shell: (byte ranges, variable-name nodes)."""
    kind = instruction.type
    if kind in _SHELL_COMMANDS:
        out = []
        for child in instruction.named_children:
            if child.type == "json_string_array":
                out.append(([(child.start_byte, child.end_byte)], []))
            elif child.type == "shell_command":
                if not any(h.type == "heredoc_marker" for c in child.children for h in c.children):
                    out.append((_without_comment_lines(child), []))
            elif child.type == "heredoc_block" and _is_script(instruction):
                lines = [(c.start_byte, c.end_byte) for c in child.children if c.type != "heredoc_end"]
                out.append((lines, []))
        return out
    if kind == "arg_instruction":  # ARG NAME=default: the build's variables
        if any(c.type == "=" for c in instruction.children):
            return [([(instruction.named_children[0].start_byte, instruction.end_byte)], [])]
        return [([], instruction.named_children[:1])]
    if kind == "env_instruction":
        out = []
        for pair in instruction.named_children:
            if pair.type != "env_pair":
                continue
            if any(c.type == "=" for c in pair.children):
                out.append(([(pair.start_byte, pair.end_byte)], []))
            elif len(pair.named_children) >= 2:  # ENV NAME value
                name, value = pair.named_children[0], pair.named_children[-1]
                out.append(([(value.start_byte, value.end_byte)], [name]))
        return out
    return []


def _without_comment_lines(command: Node) -> list[tuple[int, int]]:
    """The command's bytes without the comment lines Docker drops from a continued
    instruction (each with its line break)."""
    ranges, cursor = [], command.start_byte
    data = command.text  # offsets below are relative to the command
    base = command.start_byte
    for child in command.children:
        if child.type != "comment":
            continue
        line_start = base + data.rfind(b"\n", 0, child.start_byte - base) + 1
        line_end = data.find(b"\n", child.end_byte - base)
        line_end = base + line_end + 1 if line_end != -1 else command.end_byte
        if line_start > cursor:
            ranges.append((cursor, line_start))
        cursor = max(cursor, line_end)
    if command.end_byte > cursor:
        ranges.append((cursor, command.end_byte))
    return ranges


def _is_script(instruction: Node) -> bool:
    """``RUN <<EOF`` (the heredoc is the script), not ``RUN python3 <<EOF`` (its input)."""
    command = next((c for c in instruction.named_children if c.type == "shell_command"), None)
    return command is not None and command.text.strip().startswith(b"<<")


def _suppressions(root: Node, suppressions: Suppressions) -> None:
    children = root.named_children
    for index, node in enumerate(children):
        if node.type != "comment":
            continue
        codes = suppressions.read(node.start_byte, node.text.decode("utf-8", "replace"))
        if codes is None:
            continue
        following = next((c for c in children[index + 1 :] if c.type != "comment"), None)
        if following is not None:
            suppressions.add(following.start_point.row + 1, following.end_point.row + 1, codes)
