"""NPU010's finding tells the reviewer which test of the chain handles the NPU."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source


def _npu010(source: str):
    result = migrate_source("m.py", source.encode(), Settings(selection=Selection.create(["ALL"])))
    assert result.error is None, result.error
    return [f for f in result.findings if f.rule == "NPU010"]


@pytest.mark.parametrize(
    "source,kind,test",
    [
        ("import torch\nif device.type == 'cuda':\n    torch.cuda.synchronize()\n"
         "elif device.type == 'npu':\n    torch.npu.synchronize()\n", "an if/elif chain", "device.type == 'npu'"),
        ("import torch\nif kind == 'cuda':\n    torch.cuda.empty_cache()\nif kind == 'npu':\n    torch.npu.empty_cache()\n",
         "an if/elif chain", "kind == 'npu'"),
        ("import torch\nn = torch.npu.device_count() if is_torch_npu_available() else torch.cuda.device_count()\n",
         "a conditional expression", "is_torch_npu_available()"),
    ],
)
def test_the_finding_names_the_chain_and_its_npu_test(source, kind, test):
    found = _npu010(source)
    assert found, "the CUDA code of an NPU-aware chain is reported under NPU010"
    for finding in found:
        assert finding.message == f"CUDA code in {kind} that already handles the NPU; left unchanged"
        assert f"the chain's NPU test is `{test}`" in finding.suggestion


def test_a_chain_whose_npu_part_is_only_a_value_gets_the_plain_suggestion():
    found = _npu010("import torch\nm = torch.cuda if use_gpu else torch.npu\nm.synchronize()\n")
    assert found and all("NPU test" not in f.suggestion and "check that its NPU branch" in f.suggestion
                         for f in found)
