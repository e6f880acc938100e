"""Elision (npu_migrate/python/elision.py): definitions no needed rule can act on are not
parsed, and the result is exactly the result of parsing the whole file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python import elision, engine
from npu_migrate.python.engine import migrate_source

ALL = Settings(selection=Selection.create(["ALL"]))
ROOT = Path(__file__).resolve().parents[2]
FIXTURE_FILES = sorted((ROOT / "fixtures" / "rules").glob("*/*.py")) + sorted((ROOT / "fixtures" / "e2e").glob("*/*.py"))


def _whole(monkeypatch, path: str, data: bytes, settings: Settings = ALL):
    """The result with elision turned off."""
    with monkeypatch.context() as m:
        m.setattr(engine, "_reduce", lambda *args: None)
        return migrate_source(path, data, settings)


def _same(a, b) -> None:
    assert (a.error, a.new_source, a.fixes, a.findings) == (b.error, b.new_source, b.fixes, b.findings)


def _reduced(source: bytes, triggers=("cuda",)) -> elision.Reduced | None:
    return elision.reduce(source, source.decode(), ast.parse(source), list(triggers))


# -- the reduced module ------------------------------------------------------------


def test_definitions_without_a_trigger_become_placeholders():
    source = (
        b"import torch\n"
        b"# about f\n"
        b"@decorator\n"
        b"def f(x):\n"
        b"    return x + 1\n"
        b"class Model:\n"
        b"    size = 3\n"
        b"    def forward(self, x):\n"
        b"        return x\n"
        b"    def move(self):\n"
        b"        return self.to('cuda')\n"
        b"def g():\n"
        b"    torch.cuda.synchronize()\n"
    )
    reduced = _reduced(source)
    assert reduced.data == (
        b"import torch\n"
        b"# about f\n"
        b"pass  # __npu_migrate_elided_0__\n"
        b"class Model:\n"
        b"    size = 3\n"
        b"    pass  # __npu_migrate_elided_1__\n"
        b"    def move(self):\n"
        b"        return self.to('cuda')\n"
        b"def g():\n"
        b"    torch.cuda.synchronize()\n"
    )
    assert [reduced.original_line(n) for n in (1, 2, 3, 4, 6, 7, 9)] == [1, 2, 3, 6, 8, 10, 12]
    assert reduced.restore(reduced.data) == source


def test_nothing_to_elide_gives_none():
    assert _reduced(b"import torch\nx = torch.cuda.is_available()\n") is None
    assert _reduced(b"def f():\n    return 'cuda'\n") is None


@pytest.mark.parametrize(
    "source",
    [
        # an alias bound from a trigger at module level is followed into functions
        b"from torch.cuda import amp as A\ndef f():\n    return A.autocast()\n",
        b"import torch.cuda as tc\ndef f():\n    tc.synchronize()\n",
        # so is a module-level name assigned from one, and a name assigned from that one
        b"DEV = 'cuda'\nOTHER = DEV\ndef f(x):\n    return x.to(OTHER)\n",
        b"if True:\n    DEV = 'cuda:0'\nclass A:\n    def f(self, x):\n        return x.to(DEV)\n",
        # a function that may rebind a module-level name
        b"DEV = 'cuda'\ndef f():\n    global DEV\n    DEV = 'cpu'\n",
        # a function importing a watched package (the import table is file-wide)
        b"import torch\nx = 'cuda'\ndef f():\n    import torch_npu\n",
    ],
)
def test_what_a_rule_may_read_is_kept(source):
    assert _reduced(source) is None


def _kept(source: bytes, triggers=(), names=()) -> list[str]:
    """Names of the top-level definitions that survive elision."""
    reduced = elision.reduce(source, source.decode(), ast.parse(source), list(triggers), list(names))
    tree = ast.parse(reduced.data if reduced is not None else source)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def test_local_names_are_found_through_the_files_imports():
    source = (
        b"import json\nimport torch as th\nfrom torch.cuda.amp import autocast as ac\n"
        b"def a(p):\n    return th.load(p)\n"
        b"def b(p):\n    return json.load(p)\n"
        b"def c():\n    with ac():\n        pass\n"
        b"def d(p):\n    return torch . load(p)  # spelled in full, spaced\n"
        b"def e():\n    return 'load'\n"
    )
    assert _kept(source, names=["torch.load"]) == ["a", "d"]
    assert _kept(source, names=["torch.cuda.amp"]) == ["c"]


def test_prose_does_not_make_a_name_worth_following():
    source = (
        b'EXAMPLE = """\n    >>> pipe.to("cuda")\n"""\n'
        b"DEVICE = 'cuda'\n"
        b"def a():\n    return EXAMPLE\n"
        b"def b(x):\n    return x.to(DEVICE)\n"
    )
    assert _kept(source, triggers=["cuda"]) == ["b"]


def test_integer_device_sites():
    from npu_migrate.rules.device.npu105_integer_device import IntegerDevice

    source = (
        b"def a(x):\n    return x.to(0)\n"
        b"def b(x, args):\n    return x.to(  # comment\n        args.local_rank)\n"
        b"def c(rank):\n    print(rank)\n"
        b"def d():\n    gpu = 1\n"
        b"def e(x):\n    return x.to(torch.float16)\n"
        b"def f(x):\n    return torch.device(rank)\n"
    )
    assert _kept(source, triggers=IntegerDevice.local_words()) == ["a", "b", "d", "f"]


def test_own_marker_in_the_source_disables_elision():
    assert _reduced(b"x = 'cuda'\ndef f():\n    pass  # __npu_migrate_elided_0__\n") is None


def test_restore_refuses_a_lost_or_moved_placeholder():
    reduced = _reduced(b"x = 'cuda'\ndef f():\n    pass\ndef g():\n    pass\n")
    with pytest.raises(elision.ElisionError):
        reduced.restore(reduced.data.replace(b"pass  # __npu_migrate_elided_1__\n", b""))
    swapped = reduced.data.replace(b"_0__", b"_X__").replace(b"_1__", b"_0__").replace(b"_X__", b"_1__")
    with pytest.raises(elision.ElisionError):
        reduced.restore(swapped)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_line_endings_and_a_missing_final_newline_survive(newline):
    source = newline.join([b"x = 'cuda'", b"def f():", b"    return 1", b"class C:", b"    def m(self):", b"        pass"])
    reduced = _reduced(source)
    assert reduced is not None and reduced.data.count(b"__npu_migrate_elided_") == 2
    assert reduced.restore(reduced.data) == source


# -- same results as parsing the whole file ------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixtures_give_the_same_result_with_and_without_elision(path, monkeypatch):
    data = path.read_bytes()
    _same(migrate_source(str(path), data, ALL), _whole(monkeypatch, str(path), data))


PADDING = [
    "def helper(x):\n    return x * 2\n",
    "@property\ndef size(self):\n    '''Mentions nothing.'''\n    return 3\n",
    "class Unrelated:\n    limit = 4\n\n    def run(self, batch):\n        return [b for b in batch]\n",
    "class Mixed:\n    def a(self):\n        return 1\n    def b(self, x):\n        # moves to the GPU\n        return x.cuda()\n",
    "def uses_rank(x, rank):\n    return x.to(rank)\n",
    "async def fetch():\n    return await other()\n",
    "def shadow(torch):\n    return torch\n",
    "def read(path):\n    import json\n    return json.load(open(path))\n",
    "def pattern():\n    import re\n    return re.compile('cuda|npu')\n",
    "DOC = '''Runs on cuda when it can.'''\n\ndef doc():\n    return DOC\n",
    "def gpu_index(args):\n    return args.gpu\n",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    fixture=st.sampled_from([p for p in FIXTURE_FILES if p.name.endswith(".before.py")]),
    padding=st.lists(st.sampled_from(PADDING), min_size=1, max_size=5),
    newline=st.sampled_from(["\n", "\r\n"]),
)
def test_padded_fixtures_give_the_same_result(fixture, padding, newline, monkeypatch):
    text = fixture.read_text()
    lines = text.splitlines(keepends=True)
    header = 1 if lines and lines[0].startswith("# npu-migrate-test:") else 0
    body = "".join(lines[header:])
    source = "".join(lines[:header]) + body + "\n\n" + "\n\n".join(padding)
    data = source.replace("\n", newline).encode()
    with_elision = migrate_source("padded.py", data, ALL)
    _same(with_elision, _whole(monkeypatch, "padded.py", data))


def test_positions_are_those_of_the_original_file():
    source = b"import torch\n\ndef unrelated():\n    return 1\n\n\ndef f():\n    torch.cuda.synchronize()\n    import xformers\n"
    result = migrate_source("p.py", source, ALL)
    assert {(f.rule, f.line) for f in result.fixes} >= {("NPU101", 8)}
    assert [(f.rule, f.line) for f in result.findings] == [("NPU902", 9)]


def test_a_swallowed_placeholder_falls_back_to_the_whole_file(monkeypatch):
    source = b"import torch\n\ndef unrelated():\n    return 1\n\ntorch.cuda.synchronize()\n"
    expected = _whole(monkeypatch, "p.py", source)

    def broken(self, new_data):
        raise elision.ElisionError("lost")

    monkeypatch.setattr(elision.Reduced, "restore", broken)
    _same(migrate_source("p.py", source, ALL), expected)
    assert expected.new_source is not None and b"def unrelated():\n    return 1\n" in expected.new_source


@pytest.mark.parametrize("path", [p for p in FIXTURE_FILES if p.name.endswith(".before.py")],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_applying_edits_only_along_their_paths_changes_nothing(path, monkeypatch):
    data = path.read_bytes()
    expected = migrate_source(str(path), data, ALL)
    monkeypatch.setattr(engine, "_paths_to", lambda ctx, edits: None)  # rebuild the whole tree
    _same(migrate_source(str(path), data, ALL), expected)


@pytest.mark.parametrize(
    "source",
    [
        # latin-1 cookie, a non-ASCII byte inside an elided function
        b"# -*- coding: latin-1 -*-\nimport torch\n\ndef greet():\n    return 'gr\xfc\xdf'\n\nx = torch.cuda.is_available()\n",
        # BOM, and the elided definition is the first line of the file
        b"\xef\xbb\xbfdef first():\n    return 1\nimport torch\ny = torch.cuda.device_count()\n",
        # CRLF with a class whose methods are partly elided
        b"import torch\r\nclass M:\r\n    def a(self):\r\n        return 1\r\n    def b(self):\r\n        return torch.cuda.is_available()\r\n",
    ],
)
@pytest.mark.parametrize("annotate", [False, True])
def test_encodings_and_annotations_survive_elision(source, annotate, monkeypatch):
    settings = Settings(selection=Selection.create(["ALL"]), annotate=annotate)
    result = migrate_source("e.py", source, settings)
    assert result.error is None and result.new_source is not None
    _same(result, _whole(monkeypatch, "e.py", source, settings))
    # everything the rules did not touch is still there, byte for byte
    untouched = [line for line in source.splitlines(keepends=True) if b"cuda" not in line and b"import torch" not in line]
    assert all(line in result.new_source for line in untouched)


def test_a_walrus_in_a_module_level_condition_is_followed():
    source = b"if (DEV := 'cuda'):\n    pass\ndef a(x):\n    return x.to(DEV)\ndef b():\n    return 1\n"
    assert _kept(source, triggers=["cuda"]) == ["a"]
