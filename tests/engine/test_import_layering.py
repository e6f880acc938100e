"""Every import points one way (docs/layout.md): no circle of imports among the modules
of npu_migrate (with its rules, installed as npu_migrate.rules) and of the runtime
(npu_runtime), and the layers do not reach upwards.

The graph is read from the source with :mod:`ast`, so it is the same whichever
modules a run happens to import: imports at module level and inside functions count
alike, and so do imports under ``if TYPE_CHECKING:``. A circle that closes only
through a late import is still a circle.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Where each package's modules live in the repository.
PACKAGES = {
    "npu_migrate": REPO / "npu_migrate",
    "npu_migrate.rules": REPO / "rules",
    "npu_runtime": REPO / "runtime" / "npu_runtime",
}
#: npu_migrate bundles the runtime under this name (pyproject.toml): the same modules.
ALIASES = {"npu_migrate._runtime": "npu_runtime"}

def _module_names() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's __init__)."""
    found = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join([package, *parts])] = (path, is_package)
    return found


def _canonical(name: str) -> str:
    for alias, real in ALIASES.items():
        if name == alias or name.startswith(alias + "."):
            return real + name[len(alias):]
    return name


def import_graph(modules: dict[str, tuple[Path, bool]] | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in its source)."""
    modules = _module_names() if modules is None else modules

    def known(name: str) -> str | None:
        name = _canonical(name)
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:  # `from package import module` imports the module
                    submodule = _canonical(f"{source}.{alias.name}")
                    targets.add(submodule if submodule in modules else known(source))
        targets.discard(None)
        targets.discard(name)
        graph[name] = targets
    return graph


@functools.cache
def project_graph() -> dict[str, set[str]]:
    return import_graph()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _describe(component: list[str], graph: dict[str, set[str]]) -> str:
    return "\n".join(f"  {m} -> {', '.join(sorted(graph[m] & set(component)))}" for m in component)


def test_no_import_circles():
    graph = project_graph()
    circles = cycles(graph)
    assert not circles, "import circles (cut them: move what both sides need below both):\n" + "\n\n".join(
        _describe(c, graph) for c in circles)


def test_the_graph_sees_late_relative_and_type_checking_imports():
    graph = project_graph()
    # module level, and `from package import module`
    assert "npu_migrate.cli.stdin" in graph["npu_migrate.cli.command"]
    # inside a function
    assert "npu_migrate.pipeline.runner" in graph["npu_migrate.cli.command"]
    # relative, in the runtime
    assert "npu_runtime.children" in graph["npu_runtime.install"]
    # the rules, as installed
    assert "npu_migrate.python.rule" in graph["npu_migrate.rules.core.npu010_already_npu_aware"]


def test_a_circle_through_a_late_import_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n")
    (tmp_path / "pkg" / "c.py").write_text("def f():\n    import pkg.a\n")
    (tmp_path / "pkg" / "d.py").write_text("from pkg import a\n")
    modules = {f"pkg.{p.stem}" if p.stem != "__init__" else "pkg": (p, p.stem == "__init__")
               for p in (tmp_path / "pkg").glob("*.py")}
    assert cycles(import_graph(modules)) == [["pkg.a", "pkg.b", "pkg.c"]]


def _imports_of(prefix: str, graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(m, t) for m, targets in graph.items() if m == prefix or m.startswith(prefix + ".") for t in targets}


def test_the_pipeline_never_imports_the_command_line_the_reports_or_a_front_end():
    """The pipeline sits below them all; it reaches a front end only by name, through
    pipeline/filetypes.py, and the rules through the registry."""
    graph = project_graph()
    allowed = ("npu_migrate.pipeline", "npu_migrate.tables", "npu_migrate.rules")
    upward = {(m, t) for m, t in _imports_of("npu_migrate.pipeline", graph)
              if t != "npu_migrate" and not t.startswith(allowed)}
    assert not upward, sorted(upward)


def test_nothing_below_the_command_line_imports_it():
    """npu_migrate/cli/ is the top: only itself, ``python -m npu_migrate`` and the
    subcommands that reuse its options and diff printer (verify, launch) import it."""
    graph = project_graph()
    users = {m for m, targets in graph.items() if any(t == "npu_migrate.cli" or t.startswith("npu_migrate.cli.")
                                                       for t in targets)}
    above = ("npu_migrate.cli", "npu_migrate.verify", "npu_migrate.launch")
    assert {m for m in users if not (m in above or m.startswith(tuple(a + "." for a in above)))} \
        == {"npu_migrate.__main__"}, sorted(users)
