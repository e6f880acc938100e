"""Device family (NPU1xx): string handling and odd-but-valid code."""

from __future__ import annotations

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import strategies as st
from npu_migrate.rules.device._device_strings import (
    is_device_word,
    literal_is_device,
    swap,
)

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

DEVICE = Settings(selection=Selection.create(["NPU1"]))


def run(source: str, select=("NPU1",)):
    result = migrate_source("t.py", source.encode(), Settings(selection=Selection.create(list(select))))
    assert result.error is None, result.error
    return result


def out(source: str, select=("NPU1",)) -> str:
    result = run(source, select)
    return source if result.new_source is None else result.new_source.decode()


@pytest.mark.parametrize(
    "literal, device",
    [
        ("'cuda'", True), ('"cuda:0"', True), ("r'cuda:1'", True), ("'''cuda'''", True),
        ("'cuda:%d'", True), ("'cuda:{}'", True), ('f"cuda:{rank}"', True), ("f'cuda'", True),
        ("b'cuda'", False), ("'cuda is great'", False), ("'cudas'", False), ("'CUDA'", False),
        ("f'{x}cuda'", False), ("'cuda:0,1'", False), ("u'cuda'", True),
    ],
)
def test_literal_is_device(literal, device):
    assert literal_is_device(cst.parse_expression(literal)) is device


@given(
    prefix=st.sampled_from(["", "r", "u", "R"]),
    quote=st.sampled_from(["'", '"', "'''", '"""']),
    index=st.one_of(st.none(), st.integers(0, 4096)),
)
def test_swap_keeps_prefix_quotes_and_index(prefix, quote, index):
    body = "cuda" if index is None else f"cuda:{index}"
    node = cst.parse_expression(f"{prefix}{quote}{body}{quote}")
    new = swap(node)
    assert new.value == f"{prefix}{quote}{body.replace('cuda', 'npu', 1)}{quote}"
    assert swap(new).value == new.value  # a second application is a no-op


@pytest.mark.parametrize(
    "name, device",
    [("device", True), ("self_device", True), ("DEVICE", True), ("dev", True), ("map_location", True),
     ("device_type", True), ("device_count", False), ("device_ids", False), ("num_devices", False),
     ("devnull", False), ("developer", False), ("device_name", False), ("local_rank", False)],
)
def test_device_words(name, device):
    assert is_device_word(name) is device


def test_name_flow_through_scopes():
    source = "import torch\naccel = 'cuda'\n\ndef f(x):\n    return x.to(accel)\n"
    assert "accel = 'npu'" in out(source)


def test_name_that_never_reaches_a_device_is_reported_not_rewritten():
    source = "import torch\nbackend = 'cuda'\nprint(backend)\n"
    result = run(source)
    assert result.new_source is None
    assert [(f.line, f.rule) for f in result.findings] == [(2, "NPU108")]


def test_map_location_values_are_rewritten_and_keys_reported():
    source = "import torch\nmapping = {'cuda:1': 'cuda:0'}\nsd = torch.load(p, map_location=mapping)\n"
    result = run(source)
    assert "mapping = {'cuda:1': 'npu:0'}" in out(source)
    assert [(f.line, f.rule) for f in result.findings] == [(2, "NPU108")]


ODD_SOURCES = [
    # match statement, walrus, decorators, nested functions, star-args, lambdas, 3.12-only syntax
    "import torch\nmatch dev:\n    case 'cuda':\n        x = x.cuda()\n",
    "import torch\nif (d := torch.device('cuda')).type == 'cuda':\n    pass\n",
    "import torch\n@torch.no_grad()\ndef f(*a, device='cuda', **k):\n    def g():\n        return torch.zeros(1, **k).to(device)\n    return g\n",
    "import torch\nf = lambda t, d='cuda': t.to(d)\n",
    "import torch\ntype Device = str\ndef f[T](x: T, device: str = 'cuda') -> T:\n    return x.to(device)\n",
    "def f(torch):\n    return torch.device('cuda')\n",
    "import torch\nx = {**{'device': 'cuda'}}\ny = [*('cuda', 'cpu')]\n",
    "import torch\nprint(f\"{'cuda'!r:>10}\")\n",
    "import torch\nx = t.cuda\ny = t.is_cuda.real\n",
]


@pytest.mark.parametrize("source", ODD_SOURCES)
def test_odd_code_does_not_crash_and_converges(source):
    first = out(source)
    if first != source:
        cst.parse_module(first)  # also 3.12 syntax, which this interpreter's ast may not know
    assert out(first) == first


def test_npu_aware_collections_are_left_alone():
    source = "import torch\nif x.device.type in ('cuda', 'npu'):\n    pass\n"
    result = run(source)
    assert result.new_source is None and result.findings == []


def test_cuda_visible_devices_needs_no_torch_npu():
    source = "import os\nimport torch\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
    assert out(source) == "import os\nimport torch\nos.environ['ASCEND_RT_VISIBLE_DEVICES'] = '0'\n"


def test_latin1_crlf_file_keeps_bytes_outside_the_fix():
    source = "# -*- coding: latin-1 -*-\r\nimport torch\r\n# caf\xe9\r\nx = t.to('cuda')\r\n".encode("latin-1")
    result = migrate_source("t.py", source, DEVICE)
    assert result.error is None
    assert result.new_source == (
        "# -*- coding: latin-1 -*-\r\nimport torch\r\n\r\ntry:\r\n    import torch_npu  # noqa: F401\r\nexcept ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before\r\n    pass\r\n\r\n# caf\xe9\r\nx = t.to('npu')\r\n"
    ).encode("latin-1")
