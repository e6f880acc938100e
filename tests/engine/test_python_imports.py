"""The Python engine's modules import one another one way only: no circle that
closes through a late (function-level) or ``TYPE_CHECKING`` import."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "npu_migrate" / "python"
PREFIX = "npu_migrate.python."


def _imports(path: Path) -> tuple[set[str], list[int]]:
    """(engine modules ``path`` imports anywhere, lines of imports not at module level)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PREFIX):
                found.add(node.module[len(PREFIX):].split(".")[0])
            elif node.module == "npu_migrate.python":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name[len(PREFIX):].split(".")[0] for a in node.names if a.name.startswith(PREFIX))
    nested = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and n not in tree.body]
    return found, nested


def test_engine_modules_import_one_way():
    graph = {p.stem: _imports(p)[0] for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert {"context", "elision", "names", "positions", "rule"} <= graph.keys()
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a circle
    assert order.index("records") < order.index("context") < order.index("rule")


def test_no_late_or_type_checking_imports_in_the_core():
    for name in ("context", "elision", "names", "positions", "rule", "records", "visitors"):
        assert _imports(PACKAGE / f"{name}.py")[1] == [], name
