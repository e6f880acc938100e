"""Migrates one shell script: prefilter, one parse, one walk of every selected
rule, then the shared byte-edit machinery (``npu_migrate/pipeline/edits.py``).

A statement that tree-sitter cannot parse (it recovers, and keeps the error
inside the top-level command that holds it) is left exactly as it is: no rule
edits or reports inside it, and NPU800 reports it when it contains a word some
selected rule looks for, so a CUDA-ism is never skipped silently. The rest of
the file is migrated as usual. When each broken statement breaks at one whole line
that is not shell on its own (a template's ``ROOT=<ROOT_PATH>``), the file is read
once more without those lines, and what the rules find in the rest of the broken
statements is reported at its own line (edits become findings: the script as
written does not run); NPU800 then sits on the line that breaks it.

``scan`` is also what the Dockerfile front end runs on the shell parts of a
Dockerfile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_migrate.pipeline import limits, treewalk
from npu_migrate.pipeline.edits import LineIndex, Recorder, finish
from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import MARKS, Suppressions
from npu_migrate.shell import syntax, targets
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
        left = self._left_launch(start, end)
        if left is not None and (left.rules is None or rule in left.rules):
            self.recorder.report(start, rule, f"{message}: left, because {left.why}",
                                 left.suggestion.format(change=f"write `{new}` there" if new else "remove it"),
                                 self._statement_at(left.start))
            return
        self.recorder.replace(start, end, new, rule, message, reason=reason)

    def _left_launch(self, start: int, end: int) -> targets.LeftLaunch | None:
        """The launch command holding ``[start, end)`` whose edits are left
        (:mod:`npu_migrate.shell.targets`), if any; outside a command (``export
        PYTORCH_CUDA_ALLOC_CONF=...``), the script's launches when every one of them is left
        whole: what the line sets reaches only those (EasyContext's launchers, round 20)."""
        node = self.root.descendant_for_byte_range(start, max(start, end - 1))
        while node is not None and node.type != "command":
            node = node.parent
        if self._nvidia_cluster is not None:
            return self._nvidia_cluster
        if node is not None:
            return targets.left_launch(node, self.facts)
        return self._every_launch_left

    @functools.cached_property
    def _nvidia_cluster(self) -> targets.LeftLaunch | None:
        return targets.nvidia_cluster(self.root)

    @functools.cached_property
    def _every_launch_left(self) -> targets.LeftLaunch | None:
        left = None
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.type == "command" and syntax.launch_args(node) is not None:
                # (a launch the tool cannot follow, `python -m pkg`, may read what the line sets)
                found = targets.left_launch(node, self.facts)
                if found is None or found.rules is not None:
                    return None
                left = left or found
            stack.extend(node.children)
        return left

    def _statement_at(self, offset: int) -> int:
        node = self.root.descendant_for_byte_range(offset, offset)
        return self.statement_of(node) if node is not None else offset

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
    broken = _broken(tree.root_node)
    recovered = _tolerant(path, data, settings, broken) if broken and ranges is None and depth == 0 else None
    _keep_parsed(broken, data, local, recorder, needed, file, UNPARSED_RULE in active, recovered)
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


def _broken(root: Node) -> list[Node]:
    """The top-level statements with a parse error."""
    return [s for s in root.children if s.has_error or s.type == "ERROR"]


@dataclass
class _Recovered:
    """What the tolerant reading of a file with broken statements found inside them."""

    culprits: list[tuple[int, int]]  # the line left out of each broken statement, in their order
    recorder: Recorder  # what the rules recorded inside the broken statements, outside those lines


def _culprit(data: bytes, statement: Node) -> tuple[int, int] | None:
    """The line of a broken top-level statement where its first error is, when that line
    is a whole command line that is not shell on its own (a template's placeholder,
    ``OPENRLHF_PATH=<OPENRLHF_ROOT_PATH>``): not continued by a ``\\``, not the
    continuation of another line, and not shared with a statement before it."""
    error = _first_error(statement)
    if error is None:
        return None
    start = data.rfind(b"\n", 0, error.start_byte) + 1
    end = data.find(b"\n", error.start_byte)
    end = len(data) if end == -1 else end
    line = data[start:end].rstrip(b"\r")
    if not line.strip() or start < statement.start_byte or line.endswith(b"\\"):
        return None
    if start > 0 and data[: start - 1].rstrip(b"\r").endswith(b"\\"):
        return None
    if not parse(data, [(start, end)]).root_node.has_error:
        return None  # the line is shell; what breaks is elsewhere (an unclosed quote, a missing `fi`)
    return start, end


def _first_error(node: Node) -> Node | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    for child in node.children:
        if child.has_error or child.type == "ERROR" or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None


_TOLERANT = ("not rewritten: line {line} is not valid shell (a template's placeholder?), so this is the parser's "
             "reading of the script without that line")


def _tolerant(path: str, data: bytes, settings: Settings, broken: list[Node]) -> _Recovered | None:
    """Read a script whose broken statements each break at one line of their own (a
    documentation template's ``<PLACEHOLDER>``) once more without those lines, so what
    the rules find in the rest of those statements is reported at its own line (the
    CUDA image assigned two lines below a placeholder). Nothing there is rewritten:
    the script as written does not run. All or nothing: if one broken statement has no
    such line, or the file still does not parse without them, None."""
    found = [_culprit(data, statement) for statement in broken]
    culprits = [c for c in found if c is not None]
    if len(culprits) != len(broken):
        return None
    lines = sorted(culprits)
    ranges, cursor = [], 0
    for start, end in lines:
        if start > cursor:
            ranges.append((cursor, start))
        cursor = end
    if cursor < len(data):
        ranges.append((cursor, len(data)))
    if not ranges or parse(data, ranges).root_node.has_error:
        return None
    seen = Recorder()
    scan(path, data, settings, seen, Suppressions(), ranges, depth=1)
    index = LineIndex(data)

    def inside(offset: int) -> int | None:
        """The culprit line of the broken statement that holds ``offset``, if any."""
        if any(start <= offset <= end for start, end in lines):
            return None
        for statement, (start, _end) in zip(broken, culprits):
            if statement.start_byte <= offset < statement.end_byte:
                return index.line(start)
        return None

    out = Recorder()
    for finding in seen.findings:
        if inside(finding.offset) is not None:
            out.findings.append(finding)
    for edit in seen.edits:
        at = edit.anchor if edit.anchor is not None else edit.start
        line = inside(at)
        if line is not None:
            new = edit.new.decode("utf-8", "replace")
            out.report(at, edit.rule, f"{edit.message} ({_TOLERANT.format(line=line)})",
                       f"write `{new}` there by hand once line {line} is shell (the placeholder filled in), or "
                       "run npu-migrate again then")
    return _Recovered(culprits, out)


def _keep_parsed(broken: list[Node], data: bytes, local: Recorder, recorder: Recorder, needed, file: ShellFile,
                 report_unparsed: bool, recovered: _Recovered | None = None) -> None:
    """Pass on what the rules recorded outside statements with parse errors; report those
    (at the line that breaks them, when the tolerant reading found one)."""
    spans = [(s.start_byte, s.end_byte, s) for s in broken]

    def clean(offset: int) -> bool:
        return not any(start <= offset < max(end, start + 1) for start, end, _ in spans)

    recorder.edits.extend(e for e in local.edits if clean(e.start))
    recorder.findings.extend(f for f in local.findings if clean(f.offset))
    if recovered is not None:
        known = {(f.offset, f.rule) for f in recorder.findings}
        recorder.findings.extend(f for f in recovered.recorder.findings if (f.offset, f.rule) not in known)
    if not report_unparsed:
        return
    triggers = {t for cls in needed for t in cls.triggers}
    where = [c[0] for c in recovered.culprits] if recovered is not None else [s.start_byte for s in broken]
    for statement, at in zip(broken, where):
        if any(t in data[statement.start_byte : statement.end_byte] for t in triggers):
            what = ("this line is not valid shell as far as the parser can tell; the command it breaks is left "
                    "unchanged, and what the rules find in the rest of it is reported at its own line"
                    if recovered is not None else
                    "this command is not valid shell as far as the parser can tell; left unchanged")
            recorder.report(
                at, UNPARSED_RULE, what,
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
