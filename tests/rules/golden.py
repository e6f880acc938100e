"""Golden fixtures: ``fixtures/rules/<RULE>/<case>.before.py`` -> ``<case>.after.py``, and
``<case>.unchanged.py`` that must stay byte-identical.

Each fixture runs with only its rule (plus NPU100, which adds ``import torch_npu``)
selected, unless its first line says ``# npu-migrate-test: select=CODES``.
Expected findings are written inline as ``# expect: NPU102`` (comma-separated) on
the line they must be reported on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from npu_migrate.python.engine import migrate_source
from npu_migrate.selection import Selection
from npu_migrate.settings import Settings

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
_EXPECT = re.compile(r"#.*\bexpect:\s*([A-Z0-9, ]+)")
_SELECT = re.compile(r"#\s*npu-migrate-test:\s*select=([A-Za-z0-9,]+)")


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    before: Path
    after: Path | None  # None: must stay unchanged

    @property
    def id(self) -> str:
        return f"{self.rule}/{self.name}"

    def settings(self) -> Settings:
        first = self.before.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        match = _SELECT.search(first)
        select = match.group(1).split(",") if match else [self.rule, "NPU100"]
        return Settings(selection=Selection.create(select))


def cases() -> list[Case]:
    found = []
    for rule_dir in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        for before in sorted(rule_dir.glob("*.before.py")):
            name = before.name[: -len(".before.py")]
            found.append(Case(rule_dir.name, name, before, rule_dir / f"{name}.after.py"))
        for same in sorted(rule_dir.glob("*.unchanged.py")):
            found.append(Case(rule_dir.name, same.name[: -len(".unchanged.py")], same, None))
    return found


def expected_findings(source: str) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            out.update((number, code.strip()) for code in match.group(1).split(",") if code.strip())
    return out


def migrate(path: Path, settings: Settings):
    result = migrate_source(str(path), path.read_bytes(), settings)
    assert result.error is None, result.error
    return result
