"""The runtime's source imports the standard library, torch and numpy only (and itself):
the training image has npu-runtime next to torch, never npu-migrate's libcst, click, rich
or pathspec. A static check over every module under runtime/npu_runtime (the preflight
too), so a stray import fails here in milliseconds; the slow wheel test proves the same
by installing the wheel alone."""

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "runtime" / "npu_runtime"
ALLOWED = set(sys.stdlib_module_names) | {"torch", "torch_npu", "numpy", "npu_runtime"}
MODULES = sorted(PACKAGE.rglob("*.py"))


def _imported_roots(path: Path) -> list[tuple[int, str]]:
    roots = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            roots += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.append((node.lineno, node.module.split(".")[0]))
    return roots


def test_the_preflight_is_among_the_checked_modules():
    assert PACKAGE / "preflight" / "cli.py" in MODULES and len(MODULES) > 15


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_module_imports_only_stdlib_torch_numpy(path):
    foreign = [f"{path.name}:{line} imports {root}" for line, root in _imported_roots(path) if root not in ALLOWED]
    assert not foreign, foreign
