"""The read-only walk (npu_migrate/python/walk.py) visits what libcst's visit_batched
visits, in the same order, trivia aside."""

from __future__ import annotations

import inspect
from pathlib import Path

import libcst as cst
import pytest

from npu_migrate.pipeline.registry import rules_for
from npu_migrate.python import walk
from npu_migrate.python.names import BindingCollector
from npu_migrate.python.visitors import CachedVisitorLookup, _visitor_names

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for p in sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "npu_migrate").rglob("*.py"))
           if p.stat().st_size > 100]
NODE_CLASSES = [c for c in vars(cst).values() if inspect.isclass(c) and issubclass(c, cst.CSTNode)]


class Recorder(cst.BatchableCSTVisitor):
    """Records every visit_/leave_ call, for every node class."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def get_visitors(self):
        def record(kind):
            return lambda node: self.events.append((kind, id(node)))

        methods = {}
        for cls in NODE_CLASSES:
            methods[f"visit_{cls.__name__}"] = record("visit")
            methods[f"leave_{cls.__name__}"] = record("leave")
        return methods


def _libcst_events(module: cst.Module) -> list[tuple[str, int]]:
    recorder = Recorder()
    nodes: dict[int, cst.CSTNode] = {}
    cst.visit_batched(module, [recorder], before_visit=lambda n: nodes.setdefault(id(n), n))
    return [(kind, key) for kind, key in recorder.events if not walk._is_trivia(type(nodes[key]))]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_walk_matches_libcst_order_without_trivia(path):
    module = cst.parse_module(path.read_bytes())
    expected = _libcst_events(module)
    recorder = Recorder()
    hooks: list[tuple[str, int]] = []
    walk.visit_batched(module, [recorder], lambda n: hooks.append(("visit", id(n))),
                       lambda n: hooks.append(("leave", id(n))))
    assert recorder.events == expected
    assert hooks == expected  # before_visit/after_leave see the same nodes


def test_the_sources_compared_are_real_code():
    assert len(SOURCES) > 150
    assert sum(len(_libcst_events(cst.parse_module(p.read_bytes()))) for p in SOURCES) > 100_000


def test_no_visitor_waits_for_a_node_the_walk_skips():
    trivia = {c.__name__ for c in NODE_CLASSES if walk._is_trivia(c)}
    assert {"Comma", "SimpleWhitespace", "Add", "EmptyLine"} <= trivia
    for visitor in [*rules_for("python").values(), BindingCollector]:
        assert issubclass(visitor, CachedVisitorLookup)
        for name in _visitor_names(visitor):  # the methods the walk dispatches to
            assert name.split("_", 1)[1] not in trivia, f"{visitor.__name__}.{name}"


def test_children_follow_libcsts_visit_order():
    assert walk.children_fields(cst.FunctionDef).index("decorators") < walk.children_fields(cst.FunctionDef).index("name")
    assert walk.children_fields(cst.Call)[:2] == ("lpar", "func")
