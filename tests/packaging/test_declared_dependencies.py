"""Every third-party module npu-migrate's code imports comes from a distribution its
pyproject.toml declares: a fresh `pip install ./runtime .` (no system site packages) must
migrate every file type. (tomlkit, nbformat and tree-sitter-json were once imported but not
declared: a pyproject.toml then failed with ModuleNotFoundError on a fresh install.)"""

import ast
import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # 3.10: the tomli backport npu-migrate declares
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
OWN = {"npu_migrate", "npu_runtime", "rules"}


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    # The emulated NPU (npu_migrate/emulate) imports torch, numpy and ninja: its extra.
    reqs = project["dependencies"] + project["optional-dependencies"]["emulate"]
    return {canonicalize_name(Requirement(r).name) for r in reqs}


def _imports() -> dict[str, str]:
    found = {}
    for path in sorted([*(REPO / "npu_migrate").rglob("*.py"), *(REPO / "rules").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                if root not in sys.stdlib_module_names and root not in OWN:
                    found.setdefault(root, f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_every_imported_distribution_is_declared():
    providers = importlib.metadata.packages_distributions()
    declared = _declared()
    missing = []
    for module, where in sorted(_imports().items()):
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not dists:
            continue  # not installed here: an optional import guarded at run time (torch_npu)
        if not dists & declared:
            missing.append(f"{where} imports {module} ({', '.join(sorted(dists))}) not in pyproject.toml")
    assert not missing, missing


def test_the_scan_sees_the_repository_file_front_ends():
    assert {"libcst", "tomlkit", "nbformat", "tree_sitter_json", "yaml"} <= set(_imports())
