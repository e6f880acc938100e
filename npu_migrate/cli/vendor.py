"""``--vendor-runtime DIR``: a copy of npu_runtime inside the repository.

When to vendor: the training cluster cannot install packages (air-gapped Ascend
clusters are common; images are built offline), so the repository must carry the
runtime itself. Otherwise install it: the migration declares ``npu-runtime==X``
(NPU854/NPU862), and ``pip install -r requirements.txt`` brings it.

The copy (``DIR/npu_runtime``):

* is written only with ``--write`` (a dry run says what it would do, ``--check`` fails
  while the copy is missing or older);
* is marked by a file, :data:`MARKER`, which discovery honours: no later run migrates
  or reports a file below it, named or walked, with or without ``--force-exclude``;
* is replaced when npu-migrate bundles a newer runtime (by version), never downgraded,
  and left as it is at the same version;
* is what ``import npu_runtime`` resolves to when ``DIR`` is on ``sys.path``: the
  directory of the script that runs (``python train.py`` puts the script's directory
  first) or ``PYTHONPATH``. Vendor into the directory of the entry points; the run
  warns about entry points elsewhere.

Then the dependency files do not declare npu-runtime (NPU854 is not needed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from npu_migrate.pipeline import runtime_bundle
from npu_migrate.pipeline.discovery import VENDORED_MARKER as MARKER

_MARKER_TEXT = """npu_runtime {version}, vendored by `npu-migrate --vendor-runtime`.
npu-migrate never migrates nor reports files below this directory, and replaces the
whole directory when it bundles a newer runtime: do not edit it.
"""


class VendorError(Exception):
    """Cannot vendor (one line, exit 2)."""


def is_vendored(directory: Path) -> bool:
    return (directory / MARKER).is_file()


def inside_vendored(path: Path) -> bool:
    """``path`` is below a vendored copy."""
    return any(is_vendored(parent) for parent in Path(path).absolute().parents)


class Finder:
    """A project's vendored copy (``<dir>/npu_runtime`` with the marker), found from the
    project's root: the root itself or a directory up to three levels below it, or one
    a walk of the tree found deeper (``walked``: ``Discovered.vendored``), that belongs
    to the same project: a copy inside another project below the root (a sibling
    application run from a parent directory) is that project's, never this one's.
    Called with a project root (the runner's projects), it answers for that project."""

    def __init__(self, walked: list[str] = ()) -> None:
        self.walked = list(walked)
        self.found: dict[str, str | None] = {}

    def __call__(self, root: str | None) -> str | None:
        if root is None:
            return None
        if root not in self.found:
            self.found[root] = self._find(Path(root))
        return self.found[root]

    def _find(self, root: Path) -> str | None:
        from npu_migrate.pipeline.config import project_root

        candidates = [str(root)] if is_vendored(root / runtime_bundle.MODULE) else []
        for pattern in ("*", "*/*", "*/*/*"):
            for marker in sorted(root.glob(f"{pattern}/{runtime_bundle.MODULE}/{MARKER}")):
                if marker.is_file() and not marker.is_symlink():
                    candidates.append(str(marker.parent.parent))
        candidates += [str(Path(d).absolute()) for d in self.walked]
        root_text = str(root.absolute())
        for candidate in candidates:
            # the copy's own directory is its project's: it must be this one
            if project_root(Path(candidate).absolute() / runtime_bundle.MODULE) == root_text:
                return candidate
        return None

    def any(self) -> str | None:
        """A copy found for some project of the run (for messages)."""
        return next((copy for copy in self.found.values() if copy is not None), None)


def find(paths: list[str], root: Path) -> str | None:
    """A vendored copy a later run (without ``--vendor-runtime``) should know about:
    ``<dir>/npu_runtime`` with the marker, for a directory the run was given, the
    configuration's root, or a directory up to three levels below it or below a named
    file's project (a walk of the tree finds deeper ones: ``Discovered.vendored``)."""
    for directory in [*(Path(p) for p in paths), root]:
        if directory.is_dir() and is_vendored(directory / runtime_bundle.MODULE):
            return str(directory)
    # named files (pre-commit passes file names): a copy up to three levels below the root
    # or below the project each named path belongs to
    for top in dict.fromkeys([root, *(_project_of(Path(p)) for p in paths)]):
        for pattern in ("*", "*/*", "*/*/*"):
            for marker in sorted(top.glob(f"{pattern}/{runtime_bundle.MODULE}/{MARKER}")):
                if marker.is_file() and not marker.is_symlink():
                    return str(marker.parent.parent)
    return None


def _project_of(path: Path) -> Path:
    """The nearest directory at or above ``path`` that holds a repository or project file."""
    start = path.absolute() if path.is_dir() else path.absolute().parent
    for directory in (start, *start.parents):
        if any((directory / name).exists() for name in (".git", "pyproject.toml", "setup.py", "setup.cfg")):
            return directory
    return start


@dataclass
class Plan:
    target: Path
    action: str  # "create", "update", "up to date", "newer"
    current: str | None
    bundled: str


def plan(directory: Path) -> Plan:
    target = directory / runtime_bundle.MODULE
    bundled = runtime_bundle.version()
    if not target.exists():
        return Plan(target, "create", None, bundled)
    if not target.is_dir():
        raise VendorError(f"{target} exists and is not a directory")
    current = runtime_bundle.read_version(target)
    if not is_vendored(target):
        raise VendorError(f"{target} exists and was not vendored by npu-migrate (no {MARKER}): "
                          "remove it, or choose another directory")
    try:
        newer = current is None or Version(bundled) > Version(current)
        older = current is not None and Version(bundled) < Version(current)
    except InvalidVersion:
        newer, older = True, False
    return Plan(target, "update" if newer else "newer" if older else "up to date", current, bundled)


def apply(p: Plan) -> None:
    """Write the copy (atomically: a temporary sibling renamed into place)."""
    source = runtime_bundle.directory()
    p.target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".npu_runtime.", dir=p.target.parent))
    try:
        fresh = staging / runtime_bundle.MODULE
        shutil.copytree(source, fresh, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        (fresh / MARKER).write_text(_MARKER_TEXT.format(version=p.bundled), encoding="utf-8")
        old = None
        if p.target.exists():
            old = staging / "old"
            os.replace(p.target, old)
        os.replace(fresh, p.target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def describe(p: Plan, written: bool) -> str:
    where = p.target
    if p.action == "create":
        return f"{'copied' if written else 'would copy'} npu_runtime {p.bundled} to {where}"
    if p.action == "update":
        return f"{'updated' if written else 'would update'} {where} from npu_runtime {p.current} to {p.bundled}"
    if p.action == "newer":
        return f"{where} holds npu_runtime {p.current}, newer than this npu-migrate's {p.bundled}: left as it is"
    return f"{where}: npu_runtime {p.current}, up to date"
