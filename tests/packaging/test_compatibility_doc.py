"""docs/compatibility.md covers every torch / torch-npu pair the migration can pin
(issue 37.5): NPU850/NPU860 add ``torch-npu==X.Y.*`` next to a torch pinned to any
series X.Y from 2.1 on, so the page needs a row for every torch series in
npu_migrate/tables/torch_npu_releases.py, naming each torch-npu release PyPI has for it
(or saying there is none)."""

import re
from pathlib import Path

from packaging.specifiers import SpecifierSet

from npu_migrate.deps import pairing
from npu_migrate.tables.torch_npu_releases import TORCH_NPU_RELEASES, TORCH_SERIES

REPO = Path(__file__).resolve().parents[2]


def _rows() -> dict[tuple[int, int], str]:
    doc = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    rows = {}
    for line in doc.splitlines():
        match = re.match(r"\| (\d+)\.(\d+) \| (.*?) \|", line)
        if match:
            rows[(int(match[1]), int(match[2]))] = match[3]
    return rows


def test_every_pinnable_series_has_a_row():
    pinnable = [series for series in TORCH_SERIES
                if pairing.minor_series(f"=={series[0]}.{series[1]}.0") == series and series >= pairing.OLDEST_PAIRED]
    assert pinnable == list(TORCH_SERIES)  # every series from 2.1 on is pinned by the rules
    assert sorted(_rows()) == sorted(pinnable)


def test_each_row_names_the_releases_its_pin_installs():
    rows = _rows()
    for series in TORCH_SERIES:
        pin = SpecifierSet(pairing.npu_specifier(series))
        releases = TORCH_NPU_RELEASES.get(series, ())
        assert all(pin.contains(release) for release in releases)
        listed = re.findall(r"\d+\.\d+\.\d+(?:\.post\d+)?", rows[series])
        if releases:
            assert set(releases) <= set(listed), (series, rows[series])
        else:
            assert rows[series].startswith("none"), (series, rows[series])


def test_the_torch_the_tests_run_is_paired():
    pyproject = (REPO / "pyproject.toml").read_text()
    (version,) = set(re.findall(r'"torch==(\d+\.\d+)\.\d+"', pyproject))
    major, minor = map(int, version.split("."))
    assert TORCH_NPU_RELEASES[(major, minor)]
