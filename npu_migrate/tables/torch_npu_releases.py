"""Which torch-npu releases exist, and which torch each one requires (PyPI, 2026-11-28).

Read with ``pip index versions torch-npu --only-binary=:all: --platform P
--python-version V`` for P in manylinux2014/manylinux_2_28 x aarch64/x86_64 and V in
3.8-3.12: a plain ``pip index versions torch-npu`` only lists the wheels of the machine
it runs on (Python 3.11 on x86_64 misses 2.1.0-2.1.0.post6, 2.2.0, 2.2.0.post2 and
2.3.1, which have wheels for Python 3.8-3.10 only). Release candidates are left out.

**A torch-npu release requires one exact torch**: ``torch-npu X.Y.Z[.postN]`` declares
``torch==X.Y.Z`` (``==X.Y.Z+cpu`` in the x86_64 wheels, ``==X.Y.Z.*`` from 2.13 on),
read from the wheels' metadata (``pip install --dry-run --no-deps --report``) of
2.1.0.post17, 2.2.0.post2, 2.3.1, 2.3.1.post6, 2.4.0.post4, 2.5.1.post1, 2.6.0.post5,
2.7.1.post11, 2.8.0.post5, 2.9.0.post9, 2.9.1, 2.10.0, 2.11.0.post3, 2.12.0.post3,
2.13.0 and 2.14.0 (2.1.0 and 2.2.0 declare nothing). So torch 2.3.0 or 2.5.0 has no
torch-npu, though its series has one: :func:`torch_of` is the torch a release needs.

The dependency rules (NPU850, NPU860; :mod:`npu_migrate.deps.pairing`) add
``torch-npu==X.Y.*`` only next to a torch pin that admits one of those torch
versions, and report every other pin with the nearest pairs that exist.
docs/compatibility.md has one row per series in :data:`TORCH_SERIES` naming the
releases below (or that there is none); tests/packaging/test_compatibility_doc.py
checks that. Refresh both when a release appears.
"""

from __future__ import annotations

#: Every torch minor series from 2.1 on that PyPI has a torch release of.
TORCH_SERIES: tuple[tuple[int, int], ...] = tuple((2, minor) for minor in range(1, 16))

#: torch-npu releases on PyPI per torch series (what ``torch-npu==X.Y.*`` can install).
#: A series with no entry has none there: 2.15 (no torch-npu yet).
TORCH_NPU_RELEASES: dict[tuple[int, int], tuple[str, ...]] = {
    (2, 1): ("2.1.0", "2.1.0.post3", "2.1.0.post6", "2.1.0.post8", "2.1.0.post10", "2.1.0.post12", "2.1.0.post13",
             "2.1.0.post17"),
    (2, 2): ("2.2.0", "2.2.0.post2"),
    (2, 3): ("2.3.1", "2.3.1.post2", "2.3.1.post4", "2.3.1.post6"),
    (2, 4): ("2.4.0", "2.4.0.post2", "2.4.0.post4"),
    (2, 5): ("2.5.1", "2.5.1.post1"),
    (2, 6): ("2.6.0", "2.6.0.post3", "2.6.0.post5"),
    (2, 7): ("2.7.1", "2.7.1.post2", "2.7.1.post4", "2.7.1.post6", "2.7.1.post8", "2.7.1.post10", "2.7.1.post11"),
    (2, 8): ("2.8.0", "2.8.0.post2", "2.8.0.post4", "2.8.0.post5"),
    (2, 9): ("2.9.0", "2.9.0.post2", "2.9.0.post4", "2.9.0.post6", "2.9.0.post8", "2.9.0.post9", "2.9.1"),
    (2, 10): ("2.10.0", "2.10.0.post2", "2.10.0.post4", "2.10.0.post6", "2.10.0.post7"),
    (2, 11): ("2.11.0", "2.11.0.post2", "2.11.0.post3"),
    (2, 12): ("2.12.0", "2.12.0.post2", "2.12.0.post3"),
    (2, 13): ("2.13.0",),
    (2, 14): ("2.14.0",),
}

#: Series whose torch-npu wheels exist only for some Pythons (from the listing above).
PYTHONS: dict[tuple[int, int], str] = {
    (2, 2): "Python 3.8-3.10 wheels only",
}


def torch_of(release: str) -> str:
    """The torch a torch-npu release requires: ``2.1.0.post17`` -> ``2.1.0``."""
    return release.split(".post")[0]


def torch_versions() -> tuple[str, ...]:
    """Every torch version some torch-npu release requires, oldest first."""
    found = {torch_of(r): None for releases in TORCH_NPU_RELEASES.values() for r in releases}
    return tuple(found)
