"""Find a real torch_npu, which the emulator must never shadow."""

from __future__ import annotations

import importlib.machinery
import os
from collections.abc import Iterable
from pathlib import Path

from . import SITE_DIR


def _same(a: str, b: Path) -> bool:
    try:
        return Path(a or ".").resolve() == b.resolve()
    except OSError:
        return False


def find_real_torch_npu(search_path: Iterable[str]) -> str | None:
    """Where ``import torch_npu`` would resolve on *search_path*, ignoring the emulator's site dir.

    Returns the module's file or directory, or None when no torch_npu is found.
    """
    entries = [p for p in search_path if not _same(p, SITE_DIR)]
    spec = importlib.machinery.PathFinder.find_spec("torch_npu", entries)
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return os.fspath(locations[0]) if locations else "torch_npu"
