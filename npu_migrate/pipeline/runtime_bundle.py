"""The copy of the runtime (``runtime/npu_runtime``) that npu-migrate carries.

npu-migrate's wheel bundles the runtime's package as ``npu_migrate._runtime`` (setup.py
maps the directory) instead of depending on the npu-runtime distribution, so that the
tool installs without torch. The copy serves three things: the version migrated
repositories are pinned to (``npu-runtime==<version>``, added with ``import
npu_runtime``), the files ``--vendor-runtime`` copies, and ``npu-migrate preflight``.
Nothing here imports the runtime: its directory is found by spec, its version read
from its ``__init__.py``.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

PACKAGE = "npu_migrate._runtime"
#: The distribution and the import name a migrated repository gets.
DISTRIBUTION = "npu-runtime"
MODULE = "npu_runtime"


class BundleMissing(Exception):
    """This installation of npu-migrate has no runtime copy (a broken install)."""


@functools.cache
def directory() -> Path:
    """The bundled package's directory (``runtime/npu_runtime`` in a checkout)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BundleMissing(f"{PACKAGE} is missing from this installation of npu-migrate")
    return Path(next(iter(spec.submodule_search_locations)))


def read_version(package_dir: Path) -> str | None:
    """``__version__`` as written in ``package_dir/__init__.py``, or None."""
    try:
        tree = ast.parse((package_dir / "__init__.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


@functools.cache
def version() -> str:
    """The bundled runtime's version (what ``npu-runtime==`` pins)."""
    found = read_version(directory())
    if found is None:
        raise BundleMissing(f"{directory()}/__init__.py has no __version__")
    return found


def requirement() -> str:
    """``npu-runtime==X.Y.Z``: what a migrated repository declares."""
    return f"{DISTRIBUTION}=={version()}"


def install_hint() -> str:
    """What to ``pip install`` for the runtime, for the line a migrated entry point prints
    where it is missing: :func:`requirement`, or the bare name without a bundled copy."""
    try:
        return requirement()
    except BundleMissing:
        return DISTRIBUTION
