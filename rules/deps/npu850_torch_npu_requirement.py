"""NPU850: add ``torch-npu`` paired with the torch a dependency file pins."""

from __future__ import annotations

import os
import re

from packaging.markers import UndefinedComparison, UndefinedEnvironmentName

from npu_migrate.deps import pairing
from npu_migrate.deps.rule import DepsRule, Example


def _marker(entry) -> str | None:
    requirement = entry.requirement
    return str(requirement.marker) if requirement is not None and requirement.marker is not None else None


def _not_linux(entry) -> bool:
    """``entry``'s marker leaves it out of every Linux machine (``sys_platform == "darwin"``,
    ``platform_system == "Windows"``): torch-npu is built for Linux only (aarch64 and
    x86_64), so no torch-npu pairs with that line. A marker that tests ``extra`` is not
    judged (which extras an install names is unknown)."""
    requirement = entry.requirement
    marker = requirement.marker if requirement is not None else None
    if marker is None or "extra" in str(marker):
        return False
    for machine in ("x86_64", "aarch64"):
        for minor in range(8, 15):
            env = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                   "platform_machine": machine, "python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0",
                   "implementation_name": "cpython", "platform_python_implementation": "CPython"}
            try:
                if marker.evaluate(env):
                    return False
            except (UndefinedEnvironmentName, UndefinedComparison, TypeError, ValueError):  # not judged
                return False
    return True


class TorchNpuRequirement(DepsRule):
    id = "NPU850"
    name = "torch-npu-requirement"
    summary = ("Add `torch-npu==X.Y.*` next to a torch pinned to X.Y in a list only Ascend machines install (an `npu` "
               "extra, requirements-npu.txt); report it for lists every machine installs, other pins with the nearest "
               "pairs, and the pairing rule where torch is not pinned")
    triggers = (b"torch",)
    rationale = """
On Ascend, torch needs torch-npu, and torch-npu X.Y requires torch X.Y
exactly (post releases such as `2.1.0.post17` fix bugs within a pairing; each
release declares one torch: `torch-npu 2.3.1.post6` requires `torch==2.3.1`). Where
a dependency list pins torch to one minor series (`torch==2.1.0`, `~=2.1.0`,
`>=2.1,<2.2`, conda `pytorch=2.1`) and admits a torch that a torch-npu release on
PyPI requires (the table in `npu_migrate/tables/torch_npu_releases.py`, read from
the wheels' metadata on 2026-11-28: 2.1.0, 2.2.0, 2.3.1, 2.4.0, 2.5.1, 2.6.0,
2.7.1, 2.8.0, 2.9.0, 2.9.1, 2.10.0 ... 2.14.0), `torch-npu==X.Y.*` pairs with it.

**Where it goes.** Only into a list that nothing but an Ascend machine installs: an
extra or a group named for the NPU (`[project.optional-dependencies] npu`,
`[dependency-groups] train-npu`, `[tool.poetry.group.ascend.dependencies]`,
setup.cfg's `[options.extras_require] npu`) or a file so named
(`requirements-npu.txt`, `environment-ascend.yml`). In a list every machine
installs (`[project] dependencies`, `requirements.txt`, `install_requires`, a
`cpu` or `cuda` extra) it is reported with the line to add, not added: a torch-npu
installed next to torch makes `import torch` itself fail where CANN is missing
(torch's device-backend autoload imports torch_npu, which loads CANN's libraries),
so every CPU development or CI machine that installs the migrated dependencies
would lose torch, and the CPU path the migration keeps (NPU100) with it. The
finding names the two usual homes: an `npu` extra (`pip install '.[npu]'` on
Ascend, as LLaMA-Factory's `torch-npu` extra) or a requirements file of the Ascend
image (`requirements-npu.txt` with `-r requirements.txt`, as verl's); Ascend base
images (ModelArts, Ascend Hub) ship torch-npu already. There it is added right
after torch, in the list's own style: its own line with the same line ending in a
requirements file, the same indentation and quotes in `pyproject.toml`'s
arrays (edited with tomlkit) and `setup.cfg`, the `pip:` sub-list of a conda
`environment.yml` (torch-npu is not on conda). torch's environment markers go
along (`; sys_platform == "linux"`), and the operator spacing follows torch's.

A torch line whose markers leave out every Linux machine (`sys_platform == "darwin"`,
`platform_system == "Windows"`, as `uv export` writes one torch per platform) gets no
torch-npu (its wheels are Linux aarch64/x86_64 only) and a note saying so; the Linux
line next to it gets its pair. Markers that test `extra` are not judged.

Where torch is not pinned (`torch`, `torch>=2.0`) the finding states the
pairing rule instead of guessing a version. A pin that no torch-npu release pairs
with (`torch==2.3.0`: the 2.3 releases require 2.3.1; `torch==2.15.0`: no torch-npu
2.15 yet) gets no line, which could not install, but a finding that names the
nearest pairs that exist (`torch==2.3.1` with `torch-npu==2.3.*`). A torch-npu requirement that is
already there is checked: one that admits another series than torch's is
reported. Nothing is added to a pip-compile output or a file with `--hash`
options (a finding says where to add it), nor after a requirement written on
`setup.cfg`'s option line (`install_requires = torch==2.1`) or in a YAML flow
sequence (`[pytorch=2.1, pip]`): there the finding gives the line to add.

Poetry's tables (`[tool.poetry.dependencies]`, `dev-dependencies`, and
`[tool.poetry.group.<name>.dependencies]`) are read through poetry-core, so
`torch = "~2.1.0"` or `"2.1.0"` pins the 2.1 series and `torch = "^2.1"`
(>=2.1,<3.0) does not; `torch-npu = "2.1.*"` goes on its own line after torch's,
with its indentation and quotes (an inline table when torch has `markers`).
A torch given as several constraints (an array), or from a path, git or URL,
is left to the reviewer.

`setup.py` has its own rule for the same decision (NPU860).
"""
    examples = (
        Example("numpy>=1.24\ntorch==2.1.0  # reported: every machine installs requirements.txt\n"),
        Example("torch>=2.0  # reported: not pinned\n"),
        Example("torch==2.5.1\ntorch-npu==2.5.1\n"),
        Example("torch==2.15.0  # reported: no torch-npu 2.15\n"),
    )

    def check(self, document) -> None:
        # Each entry's name, markers and series are computed once, and the torch pins and
        # torch-npu entries grouped by (list, markers) in one pass: comparing every torch
        # entry with every other one made 2,000 pins take 9 s (15 s with markers).
        self._elsewhere = None
        markers: dict[int, str | None] = {}

        def marker(entry) -> str | None:
            if id(entry) not in markers:
                markers[id(entry)] = _marker(entry)
            return markers[id(entry)]

        named = [(lst, e, e.name) for lst in document.lists for e in lst.entries]
        torch_npu = [e for _, e, name in named if name == pairing.TORCH_NPU]
        torches = [(lst, e, self._series(e)) for lst, e, _ in named if e.is_torch]
        series_in: dict[tuple[int, str | None], set] = {}  # (list, markers) -> its torch pins' series
        for lst, entry, series in torches:
            if series is not None:
                series_in.setdefault((id(lst), marker(entry)), set()).add(series)
        npu_in: dict[tuple[int, str | None], list] = {}  # (list, markers) -> its torch-npu entries
        for lst, entry, name in named:
            if name == pairing.TORCH_NPU:
                npu_in.setdefault((id(lst), marker(entry)), []).append(entry)
        # An unpinned torch is reported only where no torch-npu is (or will be) in the
        # file, so that the run after the fix reports the same.
        settled = bool(torch_npu) or any(series is not None and pairing.paired(e.specifier) for _, e, series in torches)
        for lst, entry, series in torches:
            if _not_linux(entry):
                self.report_entry(entry, f"`{entry.shown}` is for a platform torch-npu has no build for (torch-npu "
                                  "ships Linux aarch64/x86_64 wheels only), so no torch-npu is paired with it",
                                  "nothing to add on this line; torch-npu pairs with the project's Linux torch pin")
                continue
            if series is None:
                if not settled:
                    self.report_entry(entry, f"{self._why(entry)}, so the torch-npu to add cannot be chosen",
                                      pairing.PAIRING_RULE)
                continue
            if len(series_in[id(lst), marker(entry)]) > 1:
                self.report_entry(entry, f"`{entry.shown}` is one of several torch pins of different minor releases "
                                  f"in the {lst.where} (same markers)", "keep one torch pin per environment, then "
                                  "add torch-npu==X.Y.* for it")
                continue
            own = npu_in.get((id(lst), marker(entry)), [])
            self._torch(document, lst, entry, series, own or ([] if lst.entries and not lst.conda else torch_npu))

    def _ascend_install_elsewhere(self, document) -> bool:
        """The project installs Ascend's own list elsewhere, which lists torch and takes
        torch-npu instead (an `npu` extra of this file, a `requirements-npu.txt`).
        The same for every entry of the document: found once per check."""
        if self._elsewhere is None:
            self._elsewhere = self._find_ascend_install_elsewhere(document)
        return self._elsewhere

    def _find_ascend_install_elsewhere(self, document) -> bool:
        if any(pairing.ascend_only(lst.where, self.file.path) and any(e.is_torch for e in lst.entries)
               for lst in document.lists):
            return True
        return bool(self.file.settings.facts.ascend_torch_files - {os.path.abspath(self.file.path)})

    @staticmethod
    def _series(entry) -> tuple[int, int] | None:
        series = pairing.minor_series(entry.specifier)
        return series if series is not None and series >= pairing.OLDEST_PAIRED else None

    @staticmethod
    def _why(entry) -> str:
        if pairing.minor_series(entry.specifier) is None:
            return f"`{entry.shown}` is not pinned to one minor release"
        return f"`{entry.shown}` is older than the oldest torch-npu (torch 2.1)"

    def _torch(self, document, lst, entry, series, torch_npu) -> None:
        if not pairing.paired(entry.specifier):
            # reported whether or not torch-npu is declared yet, so that the run after a fix
            # elsewhere in the file (another torch line got its torch-npu) reports the same
            self.report_entry(entry, *pairing.unpaired(entry.shown, entry.specifier, series))
            return
        if torch_npu:
            for other in torch_npu:
                if not pairing.pairs_with(other.specifier, series):
                    self.report_entry(other, f"`{other.shown}` does not pair with `{entry.shown}`",
                                      f"torch-npu X.Y requires torch X.Y exactly: use "
                                      f"torch-npu{pairing.npu_specifier(series)}")
            return
        requirement = self._requirement(entry, series)
        target, after = lst, entry
        if lst.conda:
            pip = next((other for other in document.lists if other.where.startswith("pip") and other.entries), None)
            if pip is None:
                self.report_entry(entry, "torch-npu is not on conda and this environment has no `pip:` list",
                                  f"add `- pip` and `- pip: [{requirement}]` to the dependencies")
                return
            target, after = pip, pip.entries[-1]
        if not pairing.ascend_only(target.where, self.file.path):
            if not self._ascend_install_elsewhere(document):
                self.report_entry(entry, *pairing.base_install(requirement, target.where, self.file.path))
            return
        edit = target.add(after, requirement) if target.add is not None and document.no_additions is None else None
        if edit is None or isinstance(edit, str):
            reason = document.no_additions or edit or f"this {target.where} cannot take one more entry safely"
            self.report_entry(entry, f"torch-npu must be added next to `{entry.shown}`, but {reason}",
                              f"add `{target.written(requirement) if target.written else requirement}`")
            return
        start, end, new = edit
        self.edit(start, end, new, f"add `{requirement}` (pairs with `{entry.shown}`)", anchor=entry.start)

    @staticmethod
    def _requirement(entry, series) -> str:
        """``torch-npu==X.Y.*`` in the style of ``entry``: its operator spacing and markers."""
        spaced = " " if re.search(r"\s(?:==|~=|>=|<=|===|<|>)|(?:==|~=|>=|<=|<|>)\s", entry.text) else ""
        text = f"{pairing.TORCH_NPU}{spaced}{pairing.npu_specifier(series)[:2]}{spaced}{pairing.npu_specifier(series)[2:]}"
        requirement = entry.requirement
        if requirement is not None and requirement.marker is not None:
            text += f"; {requirement.marker}"
        return text
