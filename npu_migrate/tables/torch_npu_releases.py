"""Which torch-npu releases exist for which torch minor series (PyPI, 2026-11-27).

The dependency rules (NPU850, NPU860; :mod:`npu_migrate.deps.pairing`) add
``torch-npu==X.Y.*`` next to any torch pinned to one series X.Y from 2.1 on
(``pairing.OLDEST_PAIRED``), so the pairs they can write are every torch series in
:data:`TORCH_SERIES`. docs/compatibility.md has one row per series, naming the
torch-npu releases below (or that there is none on PyPI);
tests/packaging/test_compatibility_doc.py checks that. Refresh both with
``pip index versions torch-npu`` and ``pip index versions torch`` when a release
appears.
"""

from __future__ import annotations

#: Every torch minor series from 2.1 on that PyPI has a release of.
TORCH_SERIES: tuple[tuple[int, int], ...] = tuple((2, minor) for minor in range(1, 16))

#: torch-npu releases on PyPI per torch series (what ``torch-npu==X.Y.*`` can install).
#: Series with no entry have none there: 2.2 (Ascend published 2.2.0 builds only on its
#: own site) and 2.15 (no torch-npu yet).
TORCH_NPU_RELEASES: dict[tuple[int, int], tuple[str, ...]] = {
    (2, 1): ("2.1.0.post8", "2.1.0.post10", "2.1.0.post12", "2.1.0.post13", "2.1.0.post17"),
    (2, 3): ("2.3.1.post2", "2.3.1.post4", "2.3.1.post6"),
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
