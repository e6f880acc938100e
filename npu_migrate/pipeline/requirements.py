"""Requirements as the project facts read them, with tomllib and packaging: every
requirement string of a ``pyproject.toml`` (``[project] dependencies``, each
``optional-dependencies`` extra, ``[dependency-groups]``, Poetry's tables, whose
constraints poetry-core translates to PEP 440). The dependency front end
(:mod:`npu_migrate.deps.pyproject`) reads the same tables with tomlkit to edit them,
and shares the Poetry translation from here."""

from __future__ import annotations


def poetry_tables(document):
    """``(where, table)`` of every Poetry dependency table."""
    poetry = document.get("tool", {}).get("poetry", {})
    for key in ("dependencies", "dev-dependencies"):
        if isinstance(poetry.get(key), dict):
            yield f"[tool.poetry.{key}]", poetry[key]
    for group, value in poetry.get("group", {}).items():
        if isinstance(value, dict) and isinstance(value.get("dependencies"), dict):
            yield f"[tool.poetry.group.{group}.dependencies]", value["dependencies"]


def poetry_requirement(table, name: str, value) -> tuple[str | None, tuple]:
    """``torch = "^2.1"`` or ``torch = {version = "2.1.0", markers = "..."}`` as a PEP 508
    requirement (``torch>=2.1,<3.0``), and the leaf holding the version; None for the
    ``python`` entry, path/git/url sources and constraints poetry-core cannot read."""
    if name.lower() == "python":
        return None, ()
    if isinstance(value, str):
        constraint, markers, leaf = str(value), None, (table, name)
    elif isinstance(value, dict) and isinstance(value.get("version"), str):
        constraint, markers, leaf = str(value["version"]), value.get("markers"), (value, "version")
    else:
        return None, ()
    specifier = pep440(constraint)
    if specifier is None:
        return None, ()
    requirement = f"{name}{specifier}" + (f"; {markers}" if isinstance(markers, str) and markers else "")
    return requirement, leaf


def pep440(constraint: str) -> str | None:
    """A Poetry version constraint as a PEP 440 specifier (``^2.1`` -> ``>=2.1,<3.0``)."""
    from poetry.core.constraints.version import Version, VersionRange, parse_constraint

    try:
        parsed = parse_constraint(constraint)
    except (ValueError, RuntimeError):
        return None
    if isinstance(parsed, Version):
        return f"=={parsed.text}"
    if isinstance(parsed, VersionRange):
        text = str(parsed)
        return "" if text == "*" else text
    return None  # `2.1 || 2.2`: a union of ranges is not one torch pin


def requirement_strings(data: bytes) -> list[tuple[str, str]] | None:
    """``(normalized name, specifier)`` of every requirement a ``pyproject.toml`` lists
    (``[project] dependencies``, each ``optional-dependencies`` extra, ``[dependency-groups]``,
    Poetry's tables), read with tomllib and packaging (the project facts scan all of a
    repository's pyprojects, so not with tomlkit's slower document model); None where the
    file is not TOML. Strings that are no requirement (an ``{include-group = ...}`` table,
    a path) are skipped."""
    import tomllib
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        document = tomllib.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    project = document.get("project", {}) if isinstance(document.get("project"), dict) else {}
    lists = [project.get("dependencies")]
    for table in (project.get("optional-dependencies"), document.get("dependency-groups")):
        if isinstance(table, dict):
            lists.extend(table.values())
    texts = [item for items in lists if isinstance(items, list) for item in items if isinstance(item, str)]
    for _, table in poetry_tables(document):
        texts.extend(r for r in (poetry_requirement(table, n, v)[0] for n, v in table.items()) if r)
    found = []
    for text in texts:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        found.append((canonicalize_name(requirement.name), str(requirement.specifier)))
    return found


#: torch releases from 2.3 on, the ones an API new in some 2.x may need
_LATER_TORCH = tuple(f"2.{minor}.{patch}" for minor in range(0, 20) for patch in range(4)) + ("3.0.0",)


#: torch releases before today's, one per minor line (:func:`admits_below`)
_EARLIER_TORCH = ("1.8.1", "1.9.1", "1.10.2", "1.11.0", "1.12.1", "1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.1")


def admits_below(specifiers: str, release: str) -> bool:
    """Some specifier of ``specifiers`` (as :func:`admits_only_below` reads them) admits a
    torch release older than ``release`` (``==2.3.1``, ``>=2.1``). No specifier: False."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    earlier = [v for v in _EARLIER_TORCH if Version(v) < Version(release)]
    for text in (s.strip() for s in specifiers.split(";") if s.strip()):
        try:
            allowed = SpecifierSet(text)
        except InvalidSpecifier:
            continue
        if any(allowed.contains(v, prereleases=True) for v in earlier):
            return True
    return False


def admits_only_below(specifiers: str, release: str) -> bool:
    """``specifiers`` (``;``-separated, one per dependency file, as the project facts
    keep them) each admit only releases older than ``release`` (``~=2.1.0``, ``==2.2.2.*``,
    ``<2.3``): True. No specifier, one that cannot be read, or one that admits
    ``release`` or a later one: False, so the caller keeps to today's API."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    found = [s.strip() for s in specifiers.split(";") if s.strip()]
    if not found:
        return False
    floor = Version(release)
    later = [v for v in _LATER_TORCH if Version(v) >= floor]
    for text in found:
        try:
            allowed = SpecifierSet(text)
        except InvalidSpecifier:
            return False
        if any(allowed.contains(v, prereleases=True) for v in later):
            return False
    return True
