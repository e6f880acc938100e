"""Which front end handles a file: decided from its name, its extension and,
for scripts without a telling name, its shebang line.

Discovery uses it to pick files out of directories (and to warn about files
named explicitly that no front end handles); the runner uses it to hand each
file to its front end. A front end is a package beside ``npu_migrate/python/``
whose entry point has the signature of :data:`Migrate`; it is imported only when
a file of its type is migrated, so a Python-only tree never loads the shell
parser.

Order matters: names first (``Dockerfile.ci`` is a Dockerfile whatever its
suffix), then suffixes, then the shebang (only for files without a suffix, or
with one of :data:`SCRIPT_SUFFIXES`, so a directory walk does not open every
``.md`` and ``.png``).

To add a file type: add a :class:`FileType` to :data:`FILE_TYPES` and a
front-end package with a ``migrate(path, data, settings)`` function.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from npu_migrate.pipeline.files import nonblocking

if TYPE_CHECKING:
    from npu_migrate.pipeline.model import FileResult
    from npu_migrate.pipeline.settings import Settings

#: ``migrate(path, data, settings) -> FileResult``; never raises for bad input.
Migrate = Callable[[str, bytes, "Settings"], "FileResult"]

#: Suffixes of job scripts that are shell scripts in all but name (SLURM, PBS...):
#: their shebang decides.
SCRIPT_SUFFIXES = frozenset({".slurm", ".sbatch", ".pbs", ".qsub", ".job"})

#: How many bytes of a file the shebang test reads.
HEAD_BYTES = 128

_SHEBANG = re.compile(rb"#![ \t]*(\S+)(?:[ \t]+(\S+))?(?:[ \t]+(\S+))?")
_VERSION = re.compile(r"[\d.]+$")


@dataclass(frozen=True)
class FileType:
    #: Short name, also the ``front_end`` of the rules that run on it.
    name: str
    #: ``module:function`` of the front end's entry point (imported lazily).
    entry: str
    #: File-name globs (case-sensitive, as the conventions are).
    names: tuple[str, ...] = ()
    #: Globs of names that ``names`` would match but are not of this type.
    not_names: tuple[str, ...] = ()
    #: Globs of ``directory/name`` (the file's parent directory and its name):
    #: ``requirements/*.txt`` for mmdet-style requirement directories.
    parents: tuple[str, ...] = ()
    #: Lower-case suffixes, with the dot.
    suffixes: tuple[str, ...] = ()
    #: Interpreters named by a shebang (basename, version digits stripped).
    interpreters: tuple[str, ...] = ()
    #: The front ends whose rules run on this type (``Dockerfile`` also runs the
    #: shell rules on ``RUN`` lines).
    rule_front_ends: tuple[str, ...] = ()
    #: A file name for documented examples and the fence language of the docs.
    example_name: str = ""
    fence: str = ""

    @property
    def front_ends(self) -> tuple[str, ...]:
        return self.rule_front_ends or (self.name,)

    def migrate(self) -> Migrate:
        return _load(self.entry)


PYTHON = FileType(
    "python", "npu_migrate.python.engine:migrate_source", suffixes=(".py", ".pyi"),
    interpreters=("python", "pypy"), example_name="example.py", fence="python",
)
SHELL = FileType(
    "shell", "npu_migrate.shell.engine:migrate", suffixes=(".sh", ".bash"),
    interpreters=("sh", "bash", "dash", "ash"), example_name="example.sh", fence="bash",
)
DOCKERFILE = FileType(
    "dockerfile", "npu_migrate.dockerfile.engine:migrate",
    names=("Dockerfile", "Dockerfile.*", "*.Dockerfile", "Containerfile", "Containerfile.*"),
    not_names=("*.dockerignore",),
    suffixes=(".dockerfile",), rule_front_ends=("dockerfile", "shell"),
    example_name="Dockerfile", fence="dockerfile",
)

CONFIG = FileType(
    "config", "npu_migrate.configs.engine:migrate", suffixes=(".yaml", ".yml", ".json", ".toml"),
    example_name="config.yaml", fence="yaml",
)
DEPS = FileType(
    "deps", "npu_migrate.deps.engine:migrate",
    names=("requirements*.txt", "*-requirements.txt", "*_requirements.txt", "requirements*.in",
           "constraints*.txt", "pyproject.toml", "pyproject.*.toml", "setup.cfg", "environment*.yml",
           "environment*.yaml", "conda.yml", "conda.yaml", "conda[-_]*.yml", "conda[-_]*.yaml"),
    parents=("requirements/*.txt", "requirements/*.in"),
    rule_front_ends=("deps", "config"), example_name="requirements.txt", fence="text",
)
NOTEBOOK = FileType(
    "notebook", "npu_migrate.notebooks.engine:migrate", suffixes=(".ipynb",),
    rule_front_ends=("notebook", "python"), example_name="example.ipynb", fence="python",
)
#: README commands: shell-fenced code blocks through the shell rules, reported only
#: (npu_migrate/markdown/engine.py says why).
MARKDOWN = FileType(
    "markdown", "npu_migrate.markdown.engine:migrate", suffixes=(".md", ".markdown"),
    rule_front_ends=("shell",), example_name="README.md", fence="markdown",
)
#: Every supported file type, in the order they are tried.
FILE_TYPES: tuple[FileType, ...] = (DOCKERFILE, PYTHON, SHELL, DEPS, CONFIG, NOTEBOOK, MARKDOWN)


def named(name: str) -> FileType | None:
    """The file type called ``name`` (``"shell"``), if it is supported."""
    return next((t for t in FILE_TYPES if t.name == name), None)


@functools.cache
def _load(entry: str) -> Migrate:
    module, _, function = entry.partition(":")
    return getattr(importlib.import_module(module), function)


#: Suffixes of Jinja templates: ``config.yaml.j2`` is a template of the config type its
#: inner suffix names (:func:`npu_migrate.pipeline.file_roles.template_place` reads it
#: as a template: reported on, never rewritten).
TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2")
#: The inner suffixes a template suffix keeps: configuration only (a Python or shell
#: template is no Python or shell until it is rendered).
_TEMPLATED = (".yaml", ".yml", ".json", ".toml")


def _suffix(name: str) -> str:
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 else ""
    if suffix in TEMPLATE_SUFFIXES:
        inner = _suffix(name[:dot])
        return inner if inner in _TEMPLATED else suffix
    return suffix


@functools.cache
def _name_patterns(types: tuple[FileType, ...]) -> tuple[tuple[re.Pattern[str], re.Pattern[str] | None, FileType], ...]:
    def compiled(globs: tuple[str, ...]) -> re.Pattern[str] | None:
        return re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None

    return tuple((compiled(t.names), compiled(t.not_names), t) for t in types if t.names)


@functools.cache
def _suffixes(types: tuple[FileType, ...]) -> dict[str, FileType]:
    found: dict[str, FileType] = {}
    for file_type in types:
        for suffix in file_type.suffixes:
            found.setdefault(suffix, file_type)
    return found


def by_name(name: str) -> FileType | None:
    """The type the file name alone decides, if any. ``name`` may be a path: its
    parent directory's name then counts too (:attr:`FileType.parents`)."""
    name = name.replace(os.sep, "/")
    tail = "/".join(name.rsplit("/", 2)[-2:]) if "/" in name else ""
    name = name.rsplit("/", 1)[-1]
    if tail:
        for file_type in FILE_TYPES:
            if any(fnmatch.fnmatchcase(tail, glob) for glob in file_type.parents):
                return file_type
    for names, not_names, file_type in _name_patterns(FILE_TYPES):
        if names.match(name) and not (not_names and not_names.match(name)):
            return file_type
    return _suffixes(FILE_TYPES).get(_suffix(name))


def may_be_script(name: str) -> bool:
    """Whether a directory walk should read the file's shebang to decide."""
    suffix = _suffix(name)
    return not suffix or suffix in SCRIPT_SUFFIXES


def interpreter(head: bytes) -> str | None:
    """``bash`` for ``#!/bin/bash -e`` and ``#!/usr/bin/env -S bash``, ``python``
    for ``#!/usr/bin/python3.11``; None without a shebang."""
    if not head.startswith(b"#!"):
        return None
    match = _SHEBANG.match(head.split(b"\n", 1)[0].rstrip(b"\r"))
    if match is None:
        return None
    words = [w.decode("latin-1") for w in match.groups() if w]
    program = os.path.basename(words[0])
    if program == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not rest:
            return None
        program = os.path.basename(rest[0])
    return _VERSION.sub("", program) or None


def by_shebang(head: bytes) -> FileType | None:
    program = interpreter(head)
    if program is None:
        return None
    for file_type in FILE_TYPES:
        if program in file_type.interpreters:
            return file_type
    return None


def detect(path: str, head: bytes | None) -> FileType | None:
    """The type of the file at ``path`` whose first bytes are ``head`` (None: unknown)."""
    found = by_name(path)
    if found is None and head is not None:
        found = by_shebang(head)
    return found


def detect_file(path: str) -> FileType | None:
    """:func:`detect` for a file on disk; its first bytes are read only when its name
    does not decide."""
    found = by_name(path)
    return found if found is not None else by_shebang(read_head(path) or b"")


def read_head(path: str) -> bytes | None:
    """The first bytes of a regular file (None for FIFOs, devices, unreadable files:
    opening a FIFO to sniff it would block)."""
    try:
        with open(path, "rb", opener=nonblocking) as handle:  # a FIFO cannot block the open...
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # ...and is never read
                return None
            return handle.read(HEAD_BYTES)
    except OSError:
        return None
