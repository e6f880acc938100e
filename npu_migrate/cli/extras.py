"""What the commands that run torch need beyond the light install (``pip install npu-migrate``),
and where ``preflight`` and ``diagnose`` find the runtime's programs.

Imported by npu_migrate/cli/app.py and npu_migrate/verify/cli.py: click and the
standard library only.
"""

from __future__ import annotations

import sys

import click

#: What ``emulate`` and ``verify`` import (the [emulate] extra): checked before they start.
EMULATE_NEEDS = ("torch", "numpy")


def missing_modules(names) -> list[str]:
    """Those of ``names`` that cannot be imported here (found without importing them)."""
    from importlib.util import find_spec

    missing = []
    for name in names:
        try:
            if find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def needs_extra(command: str, missing: list[str]) -> None:
    """One line naming what to install, exit 2 (the light install has no torch)."""
    verb = "is" if len(missing) == 1 else "are"
    click.echo(f"npu-migrate {command}: needs {', '.join(missing)}, which {verb} not installed here: "
               "pip install 'npu-migrate[emulate]'", err=True)
    sys.exit(2)


def runtime_program(package: str, command: str):
    """The ``main`` of the runtime's ``package`` (``preflight``, ``diagnose``): from the copy
    npu-migrate bundles (``npu_migrate._runtime``, which needs neither torch nor npu-runtime),
    else from an installed npu-runtime; without either, one line naming what to install, exit 2."""
    from importlib import import_module

    for root in ("npu_migrate._runtime", "npu_runtime"):
        try:
            return import_module(f"{root}.{package}.cli").main
        except ImportError:
            continue
    click.echo(f"npu-migrate {command}: the runtime's {package} is not installed here: pip install npu-runtime "
               "(or 'python -m pip install ./runtime' from a source checkout)", err=True)
    sys.exit(2)
