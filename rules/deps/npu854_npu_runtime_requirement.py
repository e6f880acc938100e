"""NPU854: declare ``npu-runtime==X`` where the migrated code imports npu_runtime."""

from __future__ import annotations

import os
import re

from packaging.utils import canonicalize_name

from npu_migrate.deps.rule import DepsRule, Example

DISTRIBUTION = "npu-runtime"
#: ``-r base.txt`` / ``--requirement=base.txt`` in a requirements file
_INCLUDE = re.compile(rb"^[ \t]*(?:-r|--requirement)(?:[ \t]+|=)(\S+)", re.MULTILINE)
#: The lists that say what the project itself needs to run (not extras, groups, dev).
MAIN_LISTS = frozenset({"requirements", "[project] dependencies", "[tool.poetry.dependencies]",
                        "[options] install_requires", "pip list"})
#: The lists of a package's own install requirements (``pip install <project>``).
PACKAGE_LISTS = frozenset({"[project] dependencies", "[tool.poetry.dependencies]", "[options] install_requires"})
#: Requirements files that declare the project's own dependencies even without torch.
MAIN_REQUIREMENTS = frozenset({"requirements.txt", "requirements.in"})


#: npu-runtime's own requires-python (runtime/pyproject.toml)
RUNTIME_PYTHON = ">=3.10"
_RUNTIME_PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")


def _admits_runtime_python(specifier: str) -> bool:
    """A Python pin (``==3.8.5.*``, ``>=3.8``) that allows a Python npu-runtime installs on;
    an unreadable one counts as allowing it (declared as before)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        allowed = SpecifierSet(specifier)
    except InvalidSpecifier:
        return True
    return any(allowed.contains(f"{version}.0") or allowed.contains(f"{version}.5") for version in _RUNTIME_PYTHONS)


def _read_into_install_requires(path: str) -> bool:
    """The ``setup.py`` beside the requirements file ``path`` reads it (its name is a string
    there) and passes ``install_requires``: the file is the package's install list."""
    setup = os.path.join(os.path.dirname(os.path.abspath(path)), "setup.py")
    try:
        with open(setup, "rb") as handle:
            text = handle.read(1 << 20)
    except OSError:
        return False
    name = os.path.basename(path).encode()
    return b"install_requires" in text and re.search(rb"""["'](?:\./)?""" + re.escape(name) + rb"""["']""", text) is not None


def _is_runtime(entry) -> bool:
    return entry.name is not None and canonicalize_name(entry.name) == DISTRIBUTION


class NpuRuntimeRequirement(DepsRule):
    id = "NPU854"
    name = "npu-runtime-requirement"
    summary = "Declare `npu-runtime==X` in the dependency files when the migrated code imports npu_runtime"
    triggers = ()  # a project fact, not the file's bytes: see `wanted`
    rationale = """
NPU701 writes `import npu_runtime` (and one `npu_runtime.install()` call) into
training entry points. A repository that imports it must declare it, or the
first job on a stock Ascend image (torch and torch_npu, nothing else) stops with
`ModuleNotFoundError: npu_runtime`. So when, after the migration, some Python
file of the run imports npu_runtime, `npu-runtime==X` (X: the runtime release
this npu-migrate writes code against) is added where the repository declares
what it needs to run, in each file's own style:

* a requirements file that lists torch, or is called `requirements.txt` /
  `requirements.in`: a line of its own after the last requirement (with that
  line's line ending). A pip-compile output (or a file with `--hash` pins) is
  not edited: the finding says to add it to the `.in` file, which gets it in the
  same run when it is part of the run;
* `pyproject.toml`: `[project] dependencies` (tomlkit; the array's own
  indentation, quotes and trailing comma) and Poetry's
  `[tool.poetry.dependencies]` (`npu-runtime = "X"`); never the optional
  dependencies, dependency groups or dev dependencies;
* `setup.cfg`: `[options] install_requires`; `setup.py`: NPU862;
* conda `environment.yml`: its `pip:` list (npu-runtime is not on conda); an
  environment without one gets a finding;
* Dockerfiles install the repository's requirements file or the repository
  itself, which then declare it; a Dockerfile that installs torch inline and
  none of those gets npu-runtime in its own install command (NPU812).

Declared where it is imported: each project (the nearest directory with `.git`,
`pyproject.toml`, `setup.py`, `setup.cfg`, `requirements.txt` or `environment.yml`
above the file; a sub-application with its own requirements file is a project of
its own) declares it only when its own files import npu_runtime, so a sibling
application's requirements stay as they are. Requirements files for CI, tests,
docs or linting (under `.github/`, `ci/`, `docs/`, `tests/`..., or named
`requirements-ci.txt`, `requirements-dev.txt`, `test-requirements.txt`...) never
get it. A library whose scripts import npu_runtime but none of whose library
modules does (a package module counts as a script when one of its packages is named
`scripts`, `examples`, `experiments`, `tools`, `benchmarks`, `recipes` or `demos`:
verl's `scripts/` package, torchtitan's `torchtitan/experiments/`) keeps its install requirements (`[project] dependencies`,
`[options] install_requires`, Poetry's, `setup.py`'s via NPU862, and a requirements
file that `setup.py` reads into `install_requires`, as GaLore's does) as they are:
`pip install <library>` must not need npu-runtime; the scripts' requirements file
gets it, or the finding says what to install. The same holds where every import of
npu_runtime in the project is NPU701's guarded one (`try: import npu_runtime / except
ImportError`): the package runs without the runtime, so its install requirements stay as
they are (align-anything, held-out round 24, has an `ascend` extra of its own).
A file that already names npu-runtime is left alone, whatever the version. An environment
that pins a Python npu-runtime does not support (`python=3.8.5` in a conda environment;
npu-runtime needs 3.10 or later) gets a finding instead of the line, since a pip step that
cannot resolve stops `conda env create` as a whole; the migrated entry points still start
there (their `import npu_runtime` is guarded).
Nothing is added to a repository whose code never imports npu_runtime, nor
when `--vendor-runtime` puts a copy in the tree. Where no file of the run
declares it, the finding on the file that imports it says what to install
(`pip install npu-runtime==X`); the summary says it too.
"""
    examples = (
        Example("numpy>=1.24\n"),  # the code imports no npu_runtime: nothing to declare
    )

    @classmethod
    def wanted(cls, settings) -> bool:
        return settings.facts.runtime_requirement is not None

    def _includes_a_declaring_file(self) -> bool:
        """The requirements file includes (``-r base.txt``) a file beside it that declares
        npu-runtime itself: a main requirements file, or one that lists torch."""
        from npu_migrate.pipeline.config import project_root
        from npu_migrate.pipeline.declared import is_auxiliary

        directory = os.path.dirname(os.path.abspath(self.file.path))
        for found in _INCLUDE.finditer(self.file.data):
            included = os.path.normpath(os.path.join(directory, found.group(1).decode("utf-8", "replace")))
            if not os.path.isfile(included) or is_auxiliary(included, project_root(included)):
                continue
            if os.path.basename(included) in MAIN_REQUIREMENTS:
                return True
            try:
                with open(included, "rb") as handle:
                    if re.search(rb"^[ \t]*torch\b", handle.read(1 << 20), re.MULTILINE):
                        return True
            except OSError:
                continue
        return False

    def check(self, document) -> None:
        requirement = self.file.settings.facts.runtime_requirement
        if requirement is None:
            return
        if any(_is_runtime(e) for lst in document.lists for e in lst.entries):
            return
        from npu_migrate.pipeline.config import project_root
        from npu_migrate.pipeline.declared import is_auxiliary

        if is_auxiliary(self.file.path, project_root(self.file.path)):
            return  # CI, tests, docs: not what the project needs to run
        python = next((e for lst in document.lists for e in lst.entries if e.name == "python"
                       and e.specifier and not _admits_runtime_python(e.specifier)), None)
        if python is not None:
            # MAR's `python=3.8.5` conda environment: a pip step that cannot resolve would stop
            # `conda env create` as a whole
            self.report_entry(python, f"the code imports npu_runtime, but {DISTRIBUTION} needs Python "
                              f"{RUNTIME_PYTHON} and this environment pins `{python.shown}`; not declared here",
                              f"raise the Python pin to {RUNTIME_PYTHON.lstrip('>=')} or later and add `{requirement}`, "
                              "or vendor the runtime (--vendor-runtime DIR); the migrated entry points start without it "
                              "(they print what is lost)")
            return
        lists = [lst for lst in document.lists if lst.where in MAIN_LISTS and lst.entries]
        if self.file.settings.facts.runtime_only_in_scripts:
            # a library whose scripts import npu_runtime: its install requirements stay as they are
            lists = [lst for lst in lists if lst.where not in PACKAGE_LISTS]
            if document.format == "requirements" and _read_into_install_requires(self.file.path):
                return  # GaLore's setup.py: `install_requires=open("requirements.txt")...`
        if document.format == "requirements" and self._includes_a_declaring_file():
            return  # `-r requirements.txt`: the included file declares it
        if document.format == "requirements":
            named = os.path.basename(self.file.path) in MAIN_REQUIREMENTS
            lists = [lst for lst in lists if named or any(e.is_torch for e in lst.entries)]
        conda = [lst for lst in document.lists if lst.conda and lst.entries]
        if not lists and conda:
            self.report_entry(conda[0].entries[0], "the code imports npu_runtime and npu-runtime is not on conda; "
                              "this environment has no `pip:` list", f"add `- pip` and `- pip: [{requirement}]`")
            return
        for lst in lists:
            after = lst.entries[-1]
            edit = lst.add(after, requirement) if lst.add is not None and document.no_additions is None else None
            if edit is None or isinstance(edit, str):
                reason = (document.no_additions or edit or f"this {lst.where} cannot take one more entry safely")
                reason = reason.replace("torch-npu", DISTRIBUTION)
                self.report_entry(after, f"the code imports npu_runtime, but {reason}",
                                  f"add `{lst.written(requirement) if lst.written else requirement}`")
                continue
            start, end, new = edit
            self.edit(start, end, new, f"add `{requirement}`: the migrated code imports npu_runtime",
                      anchor=after.start)
