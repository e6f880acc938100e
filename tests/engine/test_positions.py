"""Statement-by-statement positions (npu_migrate/python/positions.py) equal libcst's
whole-module PositionProvider for every node, in whole and in reduced modules."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from npu_migrate.python import elision, walk
from npu_migrate.python.positions import Starts, StatementPositions

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for p in sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "npu_migrate").rglob("*.py"))
           if p.stat().st_size > 100]
ODD = [
    b"a = 1; b = 2\nc = (1,\n     2); d = 3\nif a: x = 1; y = 2\n",
    b"# header comment\n\n\n@dec\n\n# between\n@other(1,\n       2)\nclass A:\n\tdef f(self):\n\t\treturn 1\n",
    b"x = 1;\ny = 2 ;  z = 3  # trailing\r\nwhile x:\r\n    pass\r\nelse:\r\n    pass\r\n",
    (
        b"class A(\n    Base,\n):  # trailing\n    '''Doc.'''\n    x = 1; y = 2\n\n    # about f\n    @staticmethod\n"
        b"    # between\n    def f():\n        return (1,\n  2)\n    class B: pass\n\n\n"
    ),
    b"class T:\n\tdef f(self):\n\t\tif x:\n\t\t\treturn '''\nraw\n'''\n\t@property\n\tdef g(self): return 1\n",
    b"@dec\nclass C: x = 1\nclass D:\n\n    pass\n",
    b"\xef\xbb\xbfimport os\nasync def f():\n    async with a as b:\n        await b\n",
    b"def f():\n    return '''\nmulti\nline'''\n\n\n\n\nx = f()\n",
    b"match x:\n    case 1:\n        pass\nx = 2",
]


def _compare(module: cst.Module, starts: Starts) -> int:
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = []

    def before(node):
        if stack:
            parents[node] = stack[-1]
        stack.append(node)

    walk.visit_batched(module, [], before, lambda node: stack.pop())
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    fallbacks = []

    def fallback(node):
        fallbacks.append(node)
        return whole[node]

    positions = StatementPositions(module, starts, fallback)
    for node in parents:
        chain = [node]
        while chain[-1] in parents:
            chain.append(parents[chain[-1]])
        assert chain[-1] is module
        assert positions.get(node, chain) == whole[node], module.code_for_node(node)[:80]
    assert not fallbacks
    return len(parents)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_whole_files(path):
    data = path.read_bytes()
    _compare(cst.parse_module(data), Starts.of(ast.parse(data)))


@pytest.mark.parametrize("data", ODD)
def test_odd_layouts(data):
    assert _compare(cst.parse_module(data), Starts.of(ast.parse(data))) > 3


def _reduce(path: Path) -> elision.Reduced | None:
    data = path.read_bytes()
    return elision.reduce(data, data.decode(), ast.parse(data), ["cuda", "nccl", "amp"])


#: Files where something is elided (most rule fixtures are short scripts with nothing to leave out).
REDUCIBLE = [p for p in SOURCES if _reduce(p) is not None]


@pytest.mark.parametrize("path", REDUCIBLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_reduced_modules(path):
    reduced = _reduce(path)
    starts = Starts.of(ast.parse(path.read_bytes())).moved(reduced.reduced_line)
    _compare(cst.parse_module(reduced.data), starts)


def test_reduced_modules_are_exercised():
    assert len(REDUCIBLE) >= 20


def test_a_mismatched_grouping_falls_back_to_the_whole_module():
    module = cst.parse_module(b"a = 1\nb = 2\n")
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    used = []
    positions = StatementPositions(module, Starts([1]), lambda n: used.append(n) or whole[n])
    statement = module.body[1]
    assert positions.get(statement, [statement, module]) == whole[statement] and used == [statement]


def _chain(module, node):
    parents = {}
    stack = []

    def before(n):
        if stack:
            parents[n] = stack[-1]
        stack.append(n)

    walk.visit_batched(module, [], before, lambda n: stack.pop())
    chain = [node]
    while chain[-1] in parents:
        chain.append(parents[chain[-1]])
    return chain


def test_nodes_in_methods_are_placed_from_their_own_statement_alone():
    data = (b"import torch\n\nclass Big:\n    x = 1\n\n    @property\n    def f(self):\n"
            b"        if torch.cuda.is_available():\n            pass\n        else:\n"
            b"            y = (1,\n  2); z = torch.cuda.is_available()\n        return 1\n\n    def g(self):\n        pass\n")
    module = cst.parse_module(data)
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    positions = StatementPositions(module, Starts.of(ast.parse(data)), lambda n: pytest.fail("whole-module fallback"))
    cls = module.body[1]
    method = cls.body.body[1]
    branch = method.body.body[0]
    line = branch.orelse.body.body[0]
    call = line.body[1].value
    assert positions.get(call, _chain(module, call)) == whole[call]
    assert whole[call].start.line == 12
    assert id(line) in positions._cache  # the statement alone was generated
    assert id(method) not in positions._cache and id(cls) not in positions._cache and id(branch) not in positions._cache
    test = branch.test
    assert positions.get(test, _chain(module, test)) == whole[test]
    assert id(branch) in positions._cache and id(method) not in positions._cache
