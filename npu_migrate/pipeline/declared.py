"""Does the migrated repository declare the npu-runtime its code imports?

NPU701 writes ``import npu_runtime`` into training entry points. A repository whose
code imports it must also declare it, or the first job on a stock Ascend image (torch
and torch_npu, nothing else) stops with ``ModuleNotFoundError: npu_runtime``. The
decision is about the whole repository, so the runner makes it between two passes:

1. every file that does not declare dependencies (the code) is migrated;
2. :func:`runtime_requirement`: if some file imports npu_runtime afterwards (written
   by this run, or already there) and the runtime is not vendored
   (``--vendor-runtime``), the files that declare dependencies (requirements files,
   ``pyproject.toml``, ``setup.cfg``, conda ``environment.yml``, ``setup.py``,
   Dockerfiles) are migrated knowing ``npu-runtime==X`` (X: the runtime npu-migrate
   bundles, :mod:`npu_migrate.pipeline.runtime_bundle`), and NPU854 / NPU862 add it in each
   file's own style (NPU812: a Dockerfile that installs torch inline, with no
   requirements file, installs it in the same command);
3. :func:`report_undeclared`: where no file declares it (none exists, or none could
   take it), a finding (NPU854) on the file that imports it says what to install.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import replace

from npu_migrate.pipeline import filetypes
from npu_migrate.pipeline.facts import IMPORTS_RUNTIME, ProjectFacts, version
from npu_migrate.pipeline.model import FileResult, Finding

RULE = "NPU854"
SETUP_PY_RULE = "NPU862"
#: NPU812: a Dockerfile that installs torch inline installs npu-runtime with it.
DOCKERFILE_RULE = "NPU812"
#: The rules whose fixes declare npu-runtime.
DECLARING_RULES = frozenset({RULE, SETUP_PY_RULE, DOCKERFILE_RULE})
#: npu-runtime as a requirement names it (pip normalises ``-``, ``_`` and ``.``).
_NAMED = re.compile(rb"(?<![\w.-])npu[-_.]runtime(?![\w])", re.IGNORECASE)


def declares_dependencies(path: str) -> bool:
    """Files that declare what the repository installs: migrated in the second pass."""
    name = os.path.basename(path)
    file_type = filetypes.by_name(path)
    return name == "setup.py" or file_type in (filetypes.DEPS, filetypes.DOCKERFILE)


def runtime_importers(facts: ProjectFacts, results: Iterable[FileResult]) -> set[str]:
    """Files that import npu_runtime once this run's changes are made."""
    importers = set(facts.runtime_importers)
    for result in results:
        if result.error is None and result.new_source is not None and result.path.endswith(".py"):
            if IMPORTS_RUNTIME.search(result.new_source):
                importers.add(result.path)
            else:
                importers.discard(result.path)
    return importers


#: the oldest Python npu-runtime installs on (runtime/pyproject.toml)
RUNTIME_PYTHON = (3, 10)


def runtime_requirement(facts: ProjectFacts, code_results: list[FileResult], vendored: str | None) -> str | None:
    """``npu-runtime==X`` for the dependency rules, or None (nothing imports it, or it
    is vendored)."""
    if vendored is not None or not runtime_importers(facts, code_results):
        return None
    if facts.python_floor and version(facts.python_floor) < RUNTIME_PYTHON:
        # npu-runtime needs 3.10: declared where the project installs Python 3.8 (VideoMAEv2's
        # docs/INSTALL.md, held-out round 19), `pip install -r requirements.txt` would fail.
        # The migrated entry points import it guarded: they say in one line what is missing.
        return None
    from npu_migrate.pipeline import runtime_bundle

    try:
        return runtime_bundle.requirement()
    except runtime_bundle.BundleMissing:
        return None


#: Folders whose files are the repository's scripts, not its library, even where the
#: folder is a package (verl's ``scripts/__init__.py``, torchtitan's ``torchtitan/experiments/``).
_SCRIPT_DIRS = frozenset({"scripts", "script", "examples", "example", "experiments", "tools", "benchmarks",
                          "benchmark", "recipes", "demo", "demos", "notebooks"})


def only_in_scripts(facts: ProjectFacts, code_results: list[FileResult]) -> bool:
    """The project has packages and none of its files that import npu_runtime (after
    this run) is a library module of one (a module of a package outside the
    :data:`_SCRIPT_DIRS` folders): only its scripts need the runtime."""
    if not facts.package_dirs:
        return False
    importers = runtime_importers(facts, code_results)
    if importers and _all_guarded(importers, code_results):
        # every import is NPU701's guarded one (`try: import npu_runtime / except ImportError:
        # npu_runtime = None`): the package runs without the runtime, so `pip install
        # <package>` must not need it either (align-anything's `[project] dependencies`, which
        # has an `ascend` extra of its own, held-out round 24)
        return True
    return bool(importers) and not any(_library_module(facts, p) for p in importers)


#: an import of npu_runtime at column 0: not inside NPU701's ``try`` block
_UNGUARDED_IMPORT = re.compile(rb"^(?:import[ \t]+npu_runtime\b|from[ \t]+npu_runtime[ \t.])", re.MULTILINE)


def _all_guarded(importers: set[str], code_results: list[FileResult]) -> bool:
    """No file of ``importers`` imports npu_runtime outside a block (as it is after this run)."""
    by_path = {r.path: r for r in code_results}
    for path in importers:
        result = by_path.get(path)
        if result is not None:
            source = source_of(result)
        else:
            try:
                with open(path, "rb") as handle:
                    source = handle.read()
            except OSError:
                return False
        if source is None or _UNGUARDED_IMPORT.search(source):
            return False
    return True


def _library_module(facts: ProjectFacts, path: str) -> bool:
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in facts.package_dirs:
        return False
    packages = []  # the folder and the packages above it: its dotted module path
    while folder in facts.package_dirs:
        packages.append(os.path.basename(folder))
        folder = os.path.dirname(folder)
    return not any(name.lower() in _SCRIPT_DIRS for name in packages)


#: Dependency files that are not what the project needs to run: CI, tests, docs, linters.
_NOT_RUNTIME_DIRS = frozenset({".github", ".gitlab", ".circleci", ".ci", "ci", "docs", "doc", "tests", "test"})
_NOT_RUNTIME_NAME = re.compile(r"(?:^|[-_.])(?:ci|tests?|testing|dev|docs?|lint|style|bench(?:mark)?s?)(?:[-_.]|$)",
                               re.IGNORECASE)


def is_auxiliary(path: str, root: str | None) -> bool:
    """A requirements file for CI, tests, docs or linting (``.github/requirements.txt``,
    ``requirements-ci.txt``, ``requirements/test.txt``, ``docs/requirements.txt``):
    never given npu-runtime (a user's ``pip install -r`` of it must not need an index
    that serves npu-runtime)."""
    relative = os.path.relpath(os.path.abspath(path), root) if root else path
    parts = relative.replace(os.sep, "/").split("/")
    if any(part.lower() in _NOT_RUNTIME_DIRS for part in parts[:-1]):
        return True
    return bool(_NOT_RUNTIME_NAME.search(os.path.splitext(parts[-1])[0]))


def _declares(result: FileResult, original_mentions: bool) -> bool:
    if any(fix.rule in DECLARING_RULES for fix in result.fixes):
        return True
    return original_mentions


def source_of(result: FileResult) -> bytes | None:
    if result.new_source is not None:
        return result.new_source
    try:
        with open(result.path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def report_undeclared(results: list[FileResult], vendored, settings) -> list[FileResult]:
    """``results`` (after they were written, if they were), with a finding on the file
    that imports npu_runtime when no dependency file of its project declares
    npu-runtime. The finding sits on the line of ``import npu_runtime`` in the file as
    it is on disk (line 1 where this dry run only proposes it), so that a later run
    reports it at the same place. ``vendored``: a directory (every project has it), or a
    function of a project's root (each project's own copy), or None. Each project
    (:func:`npu_migrate.pipeline.config.project_root`) is decided on its own: a sibling
    application's requirements file declares nothing for this one."""
    from npu_migrate.pipeline.config import project_root

    memo: dict[str, str] = {}
    groups: dict[str, list[FileResult]] = {}
    for result in results:
        groups.setdefault(project_root(result.path, memo), []).append(result)
    findings: dict[str, Finding] = {}
    for root, group in groups.items():
        copy = vendored(root) if callable(vendored) else vendored
        found = _undeclared(group, copy, settings, root)
        if found is not None:
            findings[found[0]] = found[1]
    if not findings:
        return results
    return [replace(r, findings=sorted([*r.findings, findings[r.path]])) if r.path in findings else r
            for r in results]


#: Dependency files at a project's root that may declare npu-runtime although the run
#: was not given them (pre-commit passes only the changed files).
_ROOT_DEPENDENCY_FILES = ("requirements.txt", "pyproject.toml", "setup.py", "setup.cfg", "environment.yml")


def _undeclared(results: list[FileResult], vendored: str | None, settings, root: str) -> tuple[str, Finding] | None:
    if vendored is not None:
        return None
    if any(_mentions(os.path.join(root, name)) for name in _ROOT_DEPENDENCY_FILES):
        return None  # declared already, in a file this run was not given
    importing = {}
    for result in results:
        if result.error is None and result.path.endswith(".py"):
            source = source_of(result)
            match = IMPORTS_RUNTIME.search(source) if source is not None else None
            if match is not None:
                on_disk = result.written or result.new_source is None
                importing[result.path] = source.count(b"\n", 0, match.start()) + 1 if on_disk else 1
    if not importing:
        return None
    from npu_migrate.pipeline import runtime_bundle

    try:
        requirement = runtime_bundle.requirement()
    except runtime_bundle.BundleMissing:
        return None
    for result in results:
        if declares_dependencies(result.path) and result.error is None and _declares(
                result, _mentions(result.path)):
            return None
    # The entry point NPU701 wrote the import into, else the first importer.
    written = [r.path for r in results if r.path in importing and any(f.rule == "NPU701" for f in r.fixes)]
    target = (written or sorted(importing))[0]
    if not settings.selection.active(RULE, target):
        return None
    return target, Finding(
        line=importing[target], col=0, rule=RULE,
        message=f"this file imports npu_runtime, and no dependency file of the repository declares {requirement}",
        suggestion=f"install it where the job runs, in a Python 3.10 or later (pip install {requirement}), or declare it "
                   "in the repository's requirements.txt / pyproject.toml / environment.yml where the project installs "
                   "Python 3.10 or later; or vendor it: --vendor-runtime DIR",
    )


def _mentions(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return _NAMED.search(handle.read()) is not None
    except OSError:
        return False
