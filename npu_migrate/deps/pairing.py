"""What a requirement says about torch, and the torch-npu that pairs with it.

torch-npu X.Y requires torch X.Y, and each release one exact torch
(``torch-npu 2.3.1.post6`` declares ``torch==2.3.1``; post releases such as
``2.1.0.post17`` fix bugs within the pairing; the table of releases is
:mod:`npu_migrate.tables.torch_npu_releases`), so the requirement added is
``torch-npu==X.Y.*``: it follows torch's minor series and the resolver takes the
newest post release that fits the torch. It is added only where the torch pin
admits a torch that some torch-npu release requires (:func:`paired`); a pin that
admits none (``torch==2.3.0``, ``torch==2.15.0``) is reported with the nearest pairs
that exist (:func:`unpaired`). A torch requirement is *pinned* when every
version it admits is in one X.Y series (``==2.1.0``, ``~=2.1.0``,
``>=2.1,<2.2``, ``2.1.*``); ``>=2.0`` or no version at all is not, and then the
rule states the pairing instead of guessing. Nothing here imports a parser
other than ``packaging``.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from npu_migrate.tables.packages import CUDA_LOCAL_VERSION, normalise
from npu_migrate.tables.torch_npu_releases import (
    PYTHONS,
    TORCH_NPU_RELEASES,
    torch_of,
    torch_versions,
)

TORCH = "torch"
TORCH_NPU = "torch-npu"
#: The torch-npu wheels that exist pair with torch 2.1 and later.
OLDEST_PAIRED = (2, 1)

PAIRING_RULE = (
    "torch-npu X.Y requires torch X.Y exactly (torch 2.1 or later); pin torch to one minor release "
    "(for example torch==2.5.1) and add torch-npu==2.5.* next to it"
)


def parse(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def name_of(requirement: Requirement) -> str:
    return normalise(requirement.name)


def _probes(specifier: SpecifierSet) -> list[Version]:
    found = []
    for spec in specifier:
        try:
            version = Version(spec.version.rstrip(".*").rstrip("."))
        except InvalidVersion:
            continue
        major, minor = version.release[0], version.release[1] if len(version.release) > 1 else 0
        for probe in (
            f"{major}.{minor}", f"{major}.{minor}.0", f"{major}.{minor}.99", version.public,
            f"{major}.{minor + 1}.0", f"{major}.{max(minor - 1, 0)}.99", f"{major + 1}.0.0", f"{max(major - 1, 0)}.99",
        ):
            found.append(Version(probe))
        found.append(version)  # with its local label: ==2.1.0+cu118 admits only that
    return found


def minor_series(specifier: SpecifierSet | str) -> tuple[int, int] | None:
    """The one (X, Y) every version admitted by ``specifier`` belongs to, or None
    (nothing pinned, or several series admitted)."""
    if isinstance(specifier, str):
        try:
            specifier = SpecifierSet(specifier)
        except InvalidSpecifier:
            return None
    if not len(specifier):
        return None
    admitted = {
        (v.release[0], v.release[1] if len(v.release) > 1 else 0)
        for v in _probes(specifier) if specifier.contains(v, prereleases=True)
    }
    if len(admitted) != 1:
        return None
    for spec in specifier:  # an open bound on either side admits other series too
        if spec.operator in (">", ">=", "!=") and not any(s.operator in ("<", "<=", "==", "~=", "===") for s in specifier):
            return None
        if spec.operator in ("<", "<=") and not any(s.operator in (">", ">=", "==", "~=", "===") for s in specifier):
            return None
    return admitted.pop()


def npu_specifier(series: tuple[int, int]) -> str:
    return f"=={series[0]}.{series[1]}.*"


def pairs_with(torch_npu: SpecifierSet | str, series: tuple[int, int]) -> bool:
    """Whether a torch-npu requirement admits only torch-npu releases of ``series``."""
    return minor_series(torch_npu) == series


def without_local(specifier: str) -> str:
    return CUDA_LOCAL_VERSION.sub("", specifier)


def local_cuda_label(text: str) -> str | None:
    match = CUDA_LOCAL_VERSION.search(text)
    return match.group() if match else None


_CONDA_SPEC = re.compile(r"(?P<name>[A-Za-z0-9_.\-]+)(?:::)?\s*(?P<rest>.*)")


def conda_requirement(text: str) -> tuple[str, str] | None:
    """``(name, PEP 440 specifier)`` of a conda match spec (``pytorch=2.1.0``,
    ``pytorch==2.1.0``, ``pytorch>=2.1,<2.2``, ``pytorch 2.1.0 py3.10_cuda11.8_0``,
    ``conda-forge::pytorch=2.1``): conda's ``=V`` means ``V.*``."""
    text = text.strip()
    if "::" in text:
        text = text.split("::", 1)[1]
    match = _CONDA_SPEC.fullmatch(text)
    if match is None:
        return None
    name, rest = match.group("name"), match.group("rest").strip()
    if rest.startswith("=") and not rest.startswith("=="):
        rest = "==" + rest[1:].rstrip("*").rstrip(".") + ".*"
    elif rest and rest[0].isdigit():
        rest = "==" + rest.split()[0]
    if rest.endswith("*") and not rest.endswith(".*"):
        rest = rest[:-1].rstrip(".") + ".*"
    return normalise(name), rest


_LOCAL = re.compile(r"\+[A-Za-z0-9.]+")


def paired(specifier: str) -> tuple[str, ...]:
    """The torch versions a torch requirement admits that some torch-npu release
    requires (local labels such as ``+cu118`` aside: the CUDA build is reported by
    NPU852, and its version decides the pair)."""
    try:
        spec = SpecifierSet(_LOCAL.sub("", specifier))
    except InvalidSpecifier:
        return ()
    return tuple(v for v in torch_versions() if spec.contains(v, prereleases=True))


def _pair(torch: str) -> str:
    major, minor = (int(p) for p in torch.split(".")[:2])
    note = PYTHONS.get((major, minor))
    return f"`torch=={torch}` with `torch-npu{npu_specifier((major, minor))}`" + (f" ({note})" if note else "")


def nearest(specifier: str) -> str:
    """The pairs that exist nearest to the versions a specifier names: the closest torch
    below and the closest above (one of them at the ends of the table)."""
    named = []
    for spec in SpecifierSet(_LOCAL.sub("", specifier)) if _valid(specifier) else ():
        try:
            named.append(Version(spec.version.rstrip(".*").rstrip(".")))
        except InvalidVersion:
            continue
    known = [Version(v) for v in torch_versions()]
    if not named:
        return ", ".join(_pair(str(v)) for v in known[-2:])
    low, high = min(named), max(named)
    below = [v for v in known if v < low]
    above = [v for v in known if v > high]
    picks = ([above[0]] if above else []) + ([below[-1]] if below else [])
    picks.sort(key=lambda v: v.release[:2] != low.release[:2])  # the pin's own series first
    return " or ".join(_pair(str(v)) for v in picks)


def _valid(specifier: str) -> bool:
    try:
        SpecifierSet(_LOCAL.sub("", specifier))
    except InvalidSpecifier:
        return False
    return True


def unpaired(shown: str, specifier: str, series: tuple[int, int]) -> tuple[str, str]:
    """The finding for a torch pinned to ``series`` that no torch-npu release pairs with."""
    releases = TORCH_NPU_RELEASES.get(series, ())
    if releases:
        needs = sorted({torch_of(r) for r in releases}, key=Version)
        why = (f"no torch-npu release pairs with `{shown}`: the {series[0]}.{series[1]} releases "
               f"({', '.join(releases)}) require torch {' or '.join(needs)} exactly")
    else:
        why = f"no torch-npu release exists for torch {series[0]}.{series[1]} (PyPI, 2026-11-28), so none is added"
    return why, (f"pin a torch that a torch-npu release requires; nearest: {nearest(specifier)} "
                 "(docs/compatibility.md lists every pair)")


#: A dependency list or file that only Ascend machines install: an extra or a group named
#: for the NPU (``[project.optional-dependencies] npu``, ``extras_require["ascend"]``), a
#: ``requirements-npu.txt``.
_ASCEND_ONLY = re.compile(r"(?:^|[^a-z0-9])(?:npu|ascend)(?:[^a-z0-9]|$)", re.IGNORECASE)


def ascend_only(where: str, path: str = "") -> bool:
    """Whether torch-npu may be added to the list ``where`` of the file ``path``: only where
    nothing but an Ascend machine installs it. Elsewhere a torch-npu next to torch makes
    ``import torch`` itself fail where CANN is missing (torch's device-backend autoload
    imports torch_npu, which loads CANN's libraries), so every CPU machine that installs
    the project's dependencies would lose torch."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return bool(_ASCEND_ONLY.search(where) or _ASCEND_ONLY.search(name.rsplit(".", 1)[0]))


def base_install(requirement: str, where: str, path: str = "") -> tuple[str, str]:
    """The finding for a torch-npu that pairs but is not added to ``where`` (a list every
    machine installs): message and suggestion."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or "the requirements file"
    return (f"`{requirement}` pairs with this torch but is not added to the {where}: every machine that installs "
            "it would get torch-npu, and where CANN is missing a torch-npu next to torch makes `import torch` fail "
            "(torch's device-backend autoload), so the CPU path would be lost",
            f"install it on Ascend only: an `npu` extra (`[project.optional-dependencies] npu = [\"{requirement}\"]`, "
            f"`pip install '.[npu]'`), or a requirements file of the Ascend image (`requirements-npu.txt`: "
            f"`-r {name}` and `{requirement}`); Ascend base images (ModelArts, Ascend Hub) ship torch-npu already")
