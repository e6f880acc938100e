"""docs/compatibility.md covers every torch / torch-npu pair the migration can pin
(issue 37.5): NPU850/NPU860 add ``torch-npu==X.Y.*`` next to a torch pinned to a
series X.Y only where the pin admits a torch that a torch-npu release requires, so the
page needs a row for every torch series in npu_migrate/tables/torch_npu_releases.py,
naming each torch-npu release PyPI has for it and the torch it requires (or saying
there is none)."""

import re
from pathlib import Path

from packaging.specifiers import SpecifierSet

from npu_migrate.deps import pairing
from npu_migrate.tables.torch_npu_releases import (
    TORCH_NPU_RELEASES,
    TORCH_SERIES,
    torch_of,
)

REPO = Path(__file__).resolve().parents[2]


def _rows() -> dict[tuple[int, int], list[str]]:
    doc = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.splitlines():
        match = re.match(r"\| (\d+)\.(\d+) \| (.*?) \| (.*?) \|", line)
        if match:
            rows[(int(match[1]), int(match[2]))] = [match[3], match[4]]
    return rows


def test_every_series_has_a_row():
    assert sorted(_rows()) == sorted(TORCH_SERIES)


def test_each_row_names_the_releases_its_pin_installs_and_the_torch_they_require():
    rows = _rows()
    for series in TORCH_SERIES:
        pin = SpecifierSet(pairing.npu_specifier(series))
        releases = TORCH_NPU_RELEASES.get(series, ())
        assert all(pin.contains(release) for release in releases)
        npu, torch = rows[series]
        listed = re.findall(r"\d+\.\d+\.\d+(?:\.post\d+)?", npu)
        if releases:
            assert set(releases) <= set(listed), (series, npu)
            assert {torch_of(r) for r in releases} <= set(re.findall(r"\d+\.\d+\.\d+", torch)), (series, torch)
        else:
            assert npu.startswith("none"), (series, npu)


def test_the_rules_pin_only_series_with_a_row_that_names_releases():
    """Every torch the rules can pair is a release's required torch; nothing else pairs."""
    for series in TORCH_SERIES:
        for patch in range(4):
            version = f"{series[0]}.{series[1]}.{patch}"
            paired = pairing.paired(f"=={version}")
            expected = any(torch_of(r) == version for r in TORCH_NPU_RELEASES.get(series, ()))
            assert bool(paired) == expected, version


def test_the_torch_the_tests_run_is_paired():
    pyproject = (REPO / "pyproject.toml").read_text()
    (version,) = set(re.findall(r'"torch==(\d+\.\d+\.\d+)"', pyproject))
    assert pairing.paired(f"=={version}")
