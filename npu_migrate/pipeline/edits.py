"""Byte-range edits: how the front ends other than Python change a file.

Those front ends parse a file, let their rules record replacements at the byte
offsets the parser reports and findings at an offset, and leave every other
byte alone. :func:`finish` then does what every front end must do the same way:
drop what the selection or a suppression comment turns off, add ``--annotate``
comments, apply the edits and build the :class:`~npu_migrate.pipeline.model.FileResult`
with 1-based lines and 0-based character columns, like the Python front end.

Nothing here knows a file format or imports a parser.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from npu_migrate.pipeline.model import FileResult, Finding, Fix
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import RULE, Suppressions, describe

ANNOTATION_PREFIX = "npu-migrate: "


@dataclass(frozen=True)
class TextEdit:
    """Replace ``data[start:end]`` with ``new``. ``anchor`` is the offset whose line's
    suppression comments govern the edit (default ``start``): an entry added after
    the line it pairs with is suppressed on that line."""

    start: int
    end: int
    new: bytes
    rule: str
    message: str
    anchor: int | None = None
    #: the evidence for the edit, shown in the report (None: the rule's summary)
    reason: str | None = None


@dataclass(frozen=True)
class TextFinding:
    """Manual work at ``offset``. ``statement`` is where the enclosing statement
    starts: ``--annotate`` puts its comment above that line (None: nowhere)."""

    offset: int
    rule: str
    message: str
    suggestion: str
    statement: int | None = None


@dataclass
class Recorder:
    """What the rules of one file asked for."""

    edits: list[TextEdit] = field(default_factory=list)
    findings: list[TextFinding] = field(default_factory=list)

    def replace(self, start: int, end: int, new: str | bytes, rule: str, message: str,
                anchor: int | None = None, reason: str | None = None) -> None:
        self.edits.append(TextEdit(start, end, new.encode() if isinstance(new, str) else new, rule, message, anchor,
                                   reason))

    def report(self, offset: int, rule: str, message: str, suggestion: str, statement: int | None = None) -> None:
        self.findings.append(TextFinding(offset, rule, message, suggestion, statement))


class LineIndex:
    """Byte offset -> 1-based line and 0-based character column.

    A column costs O(1) on an ASCII line, and on other lines only the bytes since the last
    position asked on the same line (positions come in file order): decoding the line
    from its start for each position made 37,000 fixes on one 500 KB command line
    quadratic (about 2 s there, minutes at a few MB)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        position = data.find(b"\n")
        while position != -1:
            self.starts.append(position + 1)
            position = data.find(b"\n", position + 1)
        self._ascii: dict[int, bool] = {}
        self._last: tuple[int, int, int] | None = None  # (line, offset, column) of a character boundary

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def line_start(self, line: int) -> int:
        return self.starts[line - 1]

    def position(self, offset: int) -> tuple[int, int]:
        line = self.line(offset)
        start = self.starts[line - 1]
        ascii_line = self._ascii.get(line)
        if ascii_line is None:
            end = self.starts[line] if line < len(self.starts) else len(self.data)
            ascii_line = self._ascii[line] = self.data[start:end].isascii()
        if ascii_line:
            return line, offset - start
        base, column = start, 0
        last = self._last
        if last is not None and last[0] == line and last[1] <= offset:
            base, column = last[1], last[2]
        # decoded in pieces split where a character starts, the same text as in one piece
        column += len(self.data[base:offset].decode("utf-8", errors="replace"))
        if offset >= len(self.data) or not 0x80 <= self.data[offset] <= 0xBF:
            self._last = (line, offset, column)
        return line, column

    def text(self, line: int) -> bytes:
        """The line's bytes without its line break."""
        end = self.starts[line] if line < len(self.starts) else len(self.data)
        return self.data[self.starts[line - 1] : end].rstrip(b"\r\n")

    def newline(self, line: int) -> bytes:
        end = self.starts[line] if line < len(self.starts) else len(self.data)
        return b"\r\n" if self.data[self.starts[line - 1] : end].endswith(b"\r\n") else b"\n"


#: Rules whose insertions at one point are all kept, in rule-id order: torch-npu (NPU850)
#: and npu-runtime (NPU854) both go after the last requirement when that is torch.
STACKED_INSERTIONS = frozenset({"NPU850", "NPU854"})


def apply(data: bytes, edits: list[TextEdit]) -> tuple[bytes, list[TextEdit]]:
    """Apply non-overlapping edits; an edit that overlaps one already taken (two
    rules on the same bytes) is dropped. Returns the new bytes and the edits applied.
    Of two edits of one rule at the same place, the one it made first is kept: the order
    of a ``set`` made that choice vary with the hash seed, from run to run (NPU850 adding
    torch-npu for a conda ``pytorch`` and a pip ``torch`` of another series)."""
    taken: list[TextEdit] = []
    for edit in sorted(dict.fromkeys(edits), key=lambda e: (e.start, e.end, e.rule)):
        if taken and edit.start < taken[-1].end:
            continue
        if taken and edit.start == edit.end == taken[-1].start == taken[-1].end and not (
                {edit.rule, taken[-1].rule} <= STACKED_INSERTIONS and edit.rule != taken[-1].rule):
            continue  # two insertions at one point: their order would be arbitrary
        taken.append(edit)
    out = bytearray()
    cursor = 0
    for edit in taken:
        out += data[cursor : edit.start]
        out += edit.new
        cursor = edit.end
    out += data[cursor:]
    return bytes(out), taken


def annotations(lines: LineIndex, findings: list[TextFinding], comment: bytes = b"#") -> list[TextEdit]:
    """``--annotate``: a ``# npu-migrate: NPUxxx message; suggestion: ...`` line above the statement of
    each finding, indented like it, unless that exact line is already there."""
    by_line: dict[int, list[bytes]] = {}
    for finding in sorted(findings, key=lambda f: (f.offset, f.rule)):
        if finding.statement is None:
            continue
        line = lines.line(finding.statement)
        message = " ".join(finding.message.split())
        suggestion = " ".join((finding.suggestion or "").split())
        note = f"{ANNOTATION_PREFIX}{finding.rule} {message}" + (f"; suggestion: {suggestion}" if suggestion else "")
        text = comment + b" " + note.encode()
        if text not in by_line.setdefault(line, []):
            by_line[line].append(text)
    edits = []
    for line, texts in by_line.items():
        above = set()
        previous = line - 1
        while previous >= 1 and lines.text(previous).lstrip().startswith(comment):
            above.add(lines.text(previous).strip())
            previous -= 1
        current = lines.text(line)
        indent = current[: len(current) - len(current.lstrip(b" \t"))]
        new = b"".join(indent + t + lines.newline(line) for t in texts if t not in above)
        if new:
            start = lines.line_start(line)
            edits.append(TextEdit(start, start, new, "annotate:", "annotation"))
    return edits


def finish(
    result: FileResult,
    data: bytes,
    recorder: Recorder,
    settings: Settings,
    suppressions: Suppressions | None = None,
    comment: bytes | None = b"#",
) -> FileResult:
    """Filter, annotate, apply; fill ``result`` (fixes, findings, new_source)."""
    lines = LineIndex(data)
    path = result.path

    def keep(rule: str, offset: int) -> bool:
        if not settings.selection.active(rule, path):
            return False
        return not (suppressions and suppressions.suppressed(lines.line(offset), rule))

    edits = [e for e in recorder.edits if keep(e.rule, e.start if e.anchor is None else e.anchor)]
    findings = [f for f in recorder.findings if keep(f.rule, f.offset)]
    if suppressions and suppressions.comments:
        findings.extend(_bad_suppressions(suppressions, keep))
    if settings.annotate and comment is not None:
        edits.extend(annotations(lines, findings, comment))
    new, applied = apply(data, edits)
    result.findings = sorted({Finding(*lines.position(f.offset), f.rule, f.message, f.suggestion) for f in findings})
    if new != data:
        result.new_source = new
        result.fixes = sorted({Fix(*lines.position(e.start), e.rule, e.message, *lines.position(e.end), reason=e.reason)
                               for e in applied if e.rule != "annotate:"})
    return result


def _bad_suppressions(suppressions: Suppressions, keep) -> list[TextFinding]:
    """NPU001 on each code of a suppression comment that names no rule."""
    from npu_migrate.pipeline.registry import rule_ids

    return [
        TextFinding(offset, RULE, *describe(code, written))
        for offset, code, written in suppressions.bad(rule_ids())
        if keep(RULE, offset)
    ]
