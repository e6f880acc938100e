"""Migrates one config file: prefilter, one parse with the format's reader, every
selected rule visits every string scalar, then the shared byte-edit machinery
(``npu_migrate/pipeline/edits.py``).

:func:`scan` is also what the dependency-file front end runs on
``pyproject.toml`` and ``environment.yml`` (their ``[tool.*]`` tables and
``variables`` are configuration too).
"""

from __future__ import annotations

import os
from types import ModuleType

from npu_migrate.configs import comments, templates
from npu_migrate.configs.document import Document, ReadError, Scalar
from npu_migrate.pipeline import limits
from npu_migrate.pipeline.edits import LineIndex, Recorder, finish
from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.file_roles import TEMPLATE_SUGGESTION, report_only, template_place
from npu_migrate.pipeline.model import TEMPLATE, FileResult
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import Suppressions
from npu_migrate.pipeline.target import NPU, Target
from npu_migrate.pipeline.target import named as named_target

#: File suffix -> the module that reads that format (imported on first use).
READERS = {
    ".yaml": "yaml_reader", ".yml": "yaml_reader",
    ".json": "json_reader",
    ".toml": "toml_reader",
}
#: The comment marker of each format, for ``--annotate`` (JSON has none).
COMMENTS = {"yaml_reader": b"#", "json_reader": None, "toml_reader": b"#"}


def reader_name(path: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    return READERS.get(suffix, "yaml_reader")


def reader(name: str) -> ModuleType:
    import importlib

    return importlib.import_module(f"npu_migrate.configs.{name}")


class ConfigFile:
    """One parsed config file and what its rules record."""

    def __init__(self, data: bytes, document: Document, recorder: Recorder, facts: ProjectFacts | None = None,
                 target: Target = NPU) -> None:
        self.data = data
        #: Project-wide facts (``npu_migrate/pipeline/facts.py``), as the Python rules see them.
        #: What CUDA becomes (npu_migrate/pipeline/target.py; the CPU for verify's reference twin).
        self.target = target
        #: Project-wide facts (``npu_migrate/pipeline/facts.py``), as the Python rules see them.
        self.facts = facts if facts is not None else ProjectFacts()
        self.document = document
        self.recorder = recorder
        self.lines = LineIndex(data)
        #: The scalar visited before the current one (argument lists: ``["--device", "cuda"]``).
        self.previous: Scalar | None = None
        #: Ids of the rules that run on this file (a rule may leave a value to another one).
        self.active: frozenset[str] = frozenset()
        #: The file's path as given ("" when unknown): a Hydra config group is a directory.
        self.path = ""

    def statement(self, scalar: Scalar) -> int:
        """Where ``--annotate`` puts its comment: above the scalar's line."""
        return self.lines.line_start(self.lines.line(scalar.start))


#: Fixes and findings one configuration file may have: each costs about 0.3 ms to record
#: and place, so a hostile file of 32 MB of ``k: cuda`` lines (2.7 M findings) would take
#: a quarter of an hour; real configurations have a few dozen.
MAX_RESULTS = 10_000


#: The largest file of a slow parser that is parsed, once a rule's trigger word is in it
#: (a file without one is never parsed, whatever its size). Measured on hostile files of
#: one key per line, on a loaded 2-core machine: PyYAML about 14 s per MB, tomlkit about
#: 70 s per MB; the bounds keep a file within about 15 s (several times that on a machine
#: loaded by other work). Real configurations are KBs.
PARSE_LIMITS = {"yaml_reader": 1 << 20, "toml_reader": 256 << 10}


def migrate(path: str, data: bytes, settings: Settings) -> FileResult:
    """Never raises for bad input: a file its parser refuses gets ``path:line: ...``,
    unless it is a template (:mod:`npu_migrate.configs.templates`): a template is
    skipped, whether its place says so or its markers explain why it does not parse."""
    result = FileResult(path=path)
    name = reader_name(path)
    if (place := template_place(path)) is not None:
        result.skipped = f"{TEMPLATE}{place})"
        return _template_findings(result, data, settings, name)
    recorder = Recorder()
    suppressions = Suppressions()
    try:
        scan(path, data, settings, recorder, suppressions, name)
    except ReadError as exc:
        if exc.syntax and templates.has_markers(data):
            fmt = name.removesuffix("_reader").upper()
            result.skipped = TEMPLATE + "{{ }} or {% %} markers; not valid " + fmt + " as written)"
            return _template_findings(result, data, settings, name)
        last = max(1, data.count(b"\n") + (0 if data.endswith(b"\n") else 1))
        result.error = f"{path}:{min(exc.line, last)}: {exc.message}"  # end of file: its last line
        return result
    return finish(result, data, recorder, settings, suppressions, comment=COMMENTS[name])


def _template_findings(result: FileResult, data: bytes, settings: Settings, name: str) -> FileResult:
    """A template is never rewritten, but what its rules find in the text around its
    actions is reported (prime-rl's Helm chart asks for ``nvidia.com/gpu``): the file is
    read with its actions blanked out (:func:`templates.neutralize`: same bytes, same
    lines), and each rewrite a rule would make becomes a finding at the same place, as
    in a CI file. A template that does not read even then gives nothing, as before."""
    neutral = templates.neutralize(data)
    recorder = Recorder()
    suppressions = Suppressions()
    try:
        scan(result.path, neutral, settings, recorder, suppressions, name)
    except (ReadError, limits.LimitError, RecursionError, MemoryError):
        return result  # a template too deep or too large to read: skipped, as before
    finish(result, neutral, recorder, settings, suppressions, comment=None)
    result = report_only(result, "template", TEMPLATE_SUGGESTION)
    result.new_source = None  # the blanked-out text is never written, whatever happened above
    return result


def active_rules(path: str, settings: Settings) -> list[type]:
    return [cls for rid, cls in rules_for("config").items() if settings.selection.active(rid, path)]


def scan(path: str, data: bytes, settings: Settings, recorder: Recorder, suppressions: Suppressions,
         reader_module: str, document: Document | None = None) -> Document | None:
    """Run the selected config rules on ``data`` (a file of the format ``reader_module``
    reads); ``document`` when the caller already read it. Returns the document, or None
    when no rule could apply and the file was not parsed."""
    needed = [cls for cls in active_rules(path, settings) if cls.triggered(data)]
    if not needed:
        return document
    if document is None:
        limit = PARSE_LIMITS.get(reader_module)
        if limit is not None and len(data) > limit:
            # the reader checks nesting before it parses; past the parse limit a deep file
            # still says it is too deep, the more useful reason
            limits.check(data, reader_module.removesuffix("_reader"))
            raise ReadError(1, f"{len(data) / (1 << 20):.1f} MB, larger than the {limit / (1 << 20):g} MB npu-migrate "
                               f"parses in a {reader_module.removesuffix('_reader').upper()} file; skipped")
        document = reader(reader_module).read(data)
    file = ConfigFile(data, document, recorder, settings.facts, named_target(settings.target))
    file.active = frozenset(cls.id for cls in needed)
    file.path = path
    rules = [cls(file) for cls in needed]
    for scalar in document.scalars:
        for rule in rules:
            rule.visit_scalar(scalar)
        file.previous = scalar
        if len(recorder.edits) + len(recorder.findings) > MAX_RESULTS:
            raise ReadError(file.lines.line(scalar.start),
                            f"more than {MAX_RESULTS} fixes and findings in one file; skipped (a data file, "
                            "not a configuration npu-migrate rewrites; exclude it)")
    for rule in rules:
        rule.leave_file()
    comments.find(data, document, file.lines, suppressions)
    return document
