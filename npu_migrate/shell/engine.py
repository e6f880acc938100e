"""Migrates one shell script: prefilter, one parse, one walk of every selected
rule, then the shared byte-edit machinery (``npu_migrate/pipeline/edits.py``).

A statement that tree-sitter cannot parse (it recovers, and keeps the error
inside the top-level command that holds it) is left exactly as it is: no rule
edits or reports inside it, and NPU800 reports it when it contains a word some
selected rule looks for, so a CUDA-ism is never skipped silently. The rest of
the file is migrated as usual.

``scan`` is also what the Dockerfile front end runs on the shell parts of a
Dockerfile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from npu_migrate.pipeline import limits, treewalk
from npu_migrate.pipeline.edits import Recorder, finish
from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import MARKS, Suppressions
from npu_migrate.shell import syntax
from npu_migrate.shell.parser import parse

if TYPE_CHECKING:
    from tree_sitter import Node

UNPARSED_RULE = "NPU800"
#: How deep shell code inside strings is followed (``eval "bash -c '...'"`` is 2).
MAX_NESTING = 2


class ShellFile:
    """One parsed script (or the shell parts of a Dockerfile) and what its rules record."""

    def __init__(self, data: bytes, root: Node, recorder: Recorder,
                 statement_of: Callable[[Node], int] | None = None, facts: ProjectFacts | None = None) -> None:
        self.data = data
        #: Project-wide facts (``npu_migrate/pipeline/facts.py``), as the Python rules see them.
        self.facts = facts if facts is not None else ProjectFacts()
        self.root = root
        self.recorder = recorder
        self.statement_of = statement_of or (lambda node: syntax.statement_start(node, data))

    def replace(self, start: int, end: int, new: str, rule: str, message: str, reason: str | None = None) -> None:
        self.recorder.replace(start, end, new, rule, message, reason=reason)

    def report(self, node: Node, rule: str, message: str, suggestion: str, offset: int | None = None) -> None:
        start = node.start_byte if offset is None else offset
        self.recorder.report(start, rule, message, suggestion, self.statement_of(node))


def migrate(path: str, data: bytes, settings: Settings) -> FileResult:
    """Never raises for bad input (a script is bytes: nothing fails to decode)."""
    result = FileResult(path=path)
    recorder = Recorder()
    suppressions = Suppressions()
    scan(path, data, settings, recorder, suppressions)
    return finish(result, data, recorder, settings, suppressions)


def active_rules(path: str, settings: Settings) -> dict[str, type]:
    return {rid: cls for rid, cls in rules_for("shell").items() if settings.selection.active(rid, path)}


def scan(
    path: str,
    data: bytes,
    settings: Settings,
    recorder: Recorder,
    suppressions: Suppressions,
    ranges: list[tuple[int, int]] | None = None,
    statement_of: Callable[[Node], int] | None = None,
    variables: Sequence[Node] = (),
    depth: int = 0,
) -> None:
    """Run the selected shell rules on ``data`` (only ``ranges`` of it, if given).
    ``variables`` are nodes of another tree whose text is a variable name (a
    Dockerfile's ``ENV NAME value``): the rules see them as ``variable_name``s."""
    active = active_rules(path, settings)
    # The prefilter looks at the text that is parsed: with ``ranges`` (one Dockerfile
    # instruction) that is not the whole file, and testing the whole file once per
    # instruction made a Dockerfile of many RUN lines quadratic.
    sample = data if not ranges else b"\n".join([*(data[s:e] for s, e in ranges), *(v.text for v in variables)])
    needed = [cls for rid, cls in active.items() if rid != UNPARSED_RULE and cls.triggered(sample)]
    if not needed:
        return
    if ranges is None:  # a Dockerfile's RUN parts: checked once, by the Dockerfile front end
        limits.check(data, "shell")  # size and nesting first (LimitError): npu_migrate/pipeline/limits.py
    tree = parse(data, ranges)
    local = Recorder()
    file = ShellFile(data, tree.root_node, local, statement_of, settings.facts)
    rules = [cls(file) for cls in needed]
    embedded = syntax.EmbeddedScripts()
    table = treewalk.handlers([*rules, embedded])
    for node in variables:
        for handler in table.get("variable_name", ()):
            handler(node)
    # Only the parsed text can hold a suppression comment the walk sees (a Dockerfile's RUN
    # parts: testing the whole file once per instruction was quadratic).
    want_comments = any(mark.encode() in sample for mark in MARKS)
    treewalk.walk(tree, table, (lambda node: _suppression(node, data, suppressions)) if want_comments else None)
    for rule in rules:
        rule.leave_file()
    _keep_parsed(tree.root_node, data, local, recorder, needed, file, UNPARSED_RULE in active)
    if depth < MAX_NESTING:
        for body, safe in embedded.heredocs:
            if body.end_byte > body.start_byte:
                _scan_heredoc(path, data, settings, recorder, suppressions, body, safe, depth)
        for string in embedded.scripts():
            start, end = syntax.content_range(string)
            if end > start:
                outer = file.statement_of(string)
                scan(path, data, settings, recorder, suppressions, [(start, end)],
                     statement_of=lambda _node, outer=outer: outer, depth=depth + 1)


_EXPANDED = ("not rewritten: the shell expands this heredoc's $, ` and \\ while writing the script, so its "
             "bytes are not the script's")


def _scan_heredoc(path: str, data: bytes, settings: Settings, recorder: Recorder, suppressions: Suppressions,
                  body: Node, safe: bool, depth: int) -> None:
    """The rules on a heredoc that holds a script (``cat <<'EOF' > job.sh``), each line
    at its own line and column. A body the shell expands while writing it (an unquoted
    delimiter and a ``$``, backquote or backslash inside) is scanned too, but what the
    rules would rewrite there is reported instead."""
    target = recorder if safe else Recorder()
    scan(path, data, settings, target, suppressions, [(body.start_byte, body.end_byte)], depth=depth + 1)
    if safe:
        return
    recorder.findings.extend(target.findings)
    for edit in target.edits:
        new = edit.new.decode("utf-8", "replace")
        recorder.report(edit.anchor if edit.anchor is not None else edit.start, edit.rule,
                        f"{edit.message} ({_EXPANDED})",
                        f"write `{new}` there by hand, or quote the heredoc's delimiter (<<'EOF') if nothing in it "
                        "needs expanding")


def _keep_parsed(root: Node, data: bytes, local: Recorder, recorder: Recorder, needed, file: ShellFile,
                 report_unparsed: bool) -> None:
    """Pass on what the rules recorded outside statements with parse errors; report those."""
    broken = [(s.start_byte, s.end_byte, s) for s in root.children if s.has_error or s.type == "ERROR"]

    def clean(offset: int) -> bool:
        return not any(start <= offset < max(end, start + 1) for start, end, _ in broken)

    recorder.edits.extend(e for e in local.edits if clean(e.start))
    recorder.findings.extend(f for f in local.findings if clean(f.offset))
    if not report_unparsed:
        return
    triggers = {t for cls in needed for t in cls.triggers}
    for start, end, statement in broken:
        if any(t in data[start:end] for t in triggers):
            recorder.report(
                start, UNPARSED_RULE,
                "this command is not valid shell as far as the parser can tell; left unchanged",
                "migrate it by hand (or fix its syntax: `bash -n` checks it), then run npu-migrate again",
                file.statement_of(statement),
            )


def _suppression(comment: Node, data: bytes, suppressions: Suppressions) -> None:
    if comment.type != "comment":
        return
    codes = suppressions.read(comment.start_byte, comment.text.decode("utf-8", "replace"))
    if codes is None:
        return
    line = comment.start_point.row + 1
    line_start = data.rfind(b"\n", 0, comment.start_byte) + 1
    if data[line_start : comment.start_byte].strip():
        suppressions.add(line, line, codes)  # after code: this line
        return
    following = comment.next_named_sibling
    while following is not None and following.type == "comment":
        following = following.next_named_sibling
    if following is not None:  # on a line of its own: the whole next statement
        suppressions.add(following.start_point.row + 1, following.end_point.row + 1, codes)
