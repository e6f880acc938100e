"""Migrates one dependency file: prefilter, the format's reader, every selected
rule, then the shared byte-edit machinery (``npu_migrate/pipeline/edits.py``).

``pyproject.toml`` and ``environment.yml`` are configuration too: the config
rules (``rules/configs/``) run on them in the same pass, so a
``[tool.x] device = "cuda"`` or a conda ``variables: {CUDA_VISIBLE_DEVICES: 0}``
is handled as in any other config file.
"""

from __future__ import annotations

import fnmatch
import importlib
import os

from npu_migrate.configs import comments
from npu_migrate.configs.document import ReadError
from npu_migrate.pipeline.edits import LineIndex, Recorder, finish
from npu_migrate.pipeline.limits import MAX_DEPENDENCY_LINES, dependency_lines
from npu_migrate.pipeline.model import FileResult
from npu_migrate.pipeline.registry import rules_for
from npu_migrate.pipeline.settings import Settings
from npu_migrate.pipeline.suppression import Suppressions

#: More requirements than this in one file are not migrated (one error line): the rules
#: compare each torch entry with the others, so a 100 KB requirements.txt of torch pins
#: (1,300 lines) took 45 s and 2 MB never finished (round 5). Hand-written lists hold
#: tens to hundreds; a pip-compile lock a few hundred.
MAX_ENTRIES = 2_000

#: File-name globs -> reader module, and the config reader for the same file (if any).
READERS = (
    ("pyproject.toml", "pyproject", "toml_reader"),
    # a project's variant manifests (AReaL's `pyproject.vllm.toml`, copied over pyproject.toml to build that variant)
    ("pyproject.*.toml", "pyproject", "toml_reader"),
    ("setup.cfg", "setup_cfg", None),
    ("environment*.yml", "conda", "yaml_reader"),
    ("environment*.yaml", "conda", "yaml_reader"),
    # dinov2's `conda.yaml` and `conda-extras.yaml`: the same format under the tool's name
    ("conda.yml", "conda", "yaml_reader"),
    ("conda.yaml", "conda", "yaml_reader"),
    ("conda[-_]*.yml", "conda", "yaml_reader"),
    ("conda[-_]*.yaml", "conda", "yaml_reader"),
    ("*", "requirements_txt", None),
)


def readers_for(path: str) -> tuple[str, str | None]:
    name = os.path.basename(path)
    return next((deps, config) for glob, deps, config in READERS if fnmatch.fnmatchcase(name, glob))


class DepsFile:
    def __init__(self, data: bytes, recorder: Recorder, path: str = "", settings: Settings | None = None) -> None:
        self.data = data
        self.recorder = recorder
        self.path = path
        self.settings = settings if settings is not None else Settings()


def check_count(count: int) -> None:
    """A ReadError for a dependency file of more than MAX_ENTRIES requirements (a reader may
    call it before it places each one: setup.cfg's 1,000,000 took 21 s to place)."""
    if count > MAX_ENTRIES:
        raise ReadError(1, f"{count:,} requirements, more than the {MAX_ENTRIES:,} npu-migrate reads from one "
                           "dependency file; skipped (a generated lock or data file? exclude it)")


#: Lines of a dependency file read at most (npu_migrate/pipeline/limits.py says why)
MAX_LINES = MAX_DEPENDENCY_LINES


def check_lines(data: bytes) -> None:
    lines = dependency_lines(data)
    if lines > MAX_LINES:
        raise ReadError(1, f"{lines:,} lines, more than the {MAX_LINES:,} npu-migrate reads in a dependency file; "
                           "skipped (a generated lock or data file? exclude it)")


def migrate(path: str, data: bytes, settings: Settings) -> FileResult:
    """Never raises for bad input: a file its parser refuses gets ``path:line: ...``."""
    result = FileResult(path=path)
    recorder = Recorder()
    suppressions = Suppressions()
    deps_reader, config_reader = readers_for(path)
    try:
        check_lines(data)
        document = None
        needed = [cls for rid, cls in rules_for("deps").items()
                  if settings.selection.active(rid, path) and (cls.triggered(data) or cls.wanted(settings))]
        if needed:
            document = importlib.import_module(f"npu_migrate.deps.{deps_reader}").read(data)
            check_count(sum(len(lst.entries) for lst in document.lists))
            file = DepsFile(data, recorder, path, settings)
            for cls in needed:
                cls(file).check(document)
            comments.find(data, document, LineIndex(data), suppressions)
        if config_reader is not None:
            from npu_migrate.configs import engine as configs

            configs.scan(path, data, settings, recorder, suppressions, config_reader)
    except ReadError as exc:
        last = max(1, data.count(b"\n") + (0 if data.endswith(b"\n") else 1))
        result.error = f"{path}:{min(exc.line, last)}: {exc.message}"
        return result
    return finish(result, data, recorder, settings, suppressions)
