"""Adding imports on the module's head only (engine.add_imports_at_top) gives
what libcst's AddImportsVisitor gives on the whole module."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from npu_migrate.python import engine

MODULES = [
    "",
    "x = 1\n",
    "import os\n",
    '"""Doc."""\n',
    '"""Doc."""\nimport os\n\nx = 1\n',
    '"""Doc."""\n# comment\nx = 1\n',
    "__strict__ = True\nimport torch\nfrom torch import nn\n\n\ndef f():\n    import torch_npu\n",
    "from __future__ import annotations\nimport torch\nif True:\n    import torch.distributed\n",
    "import os, sys\nimport torch\nx = 1\nimport numpy\n",
    "import torch; import os\nfrom torch.amp import autocast\n\n# leading comment\nclass A:\n    pass\n",
    "from torch import amp\nfrom torch.utils.data import DataLoader\nprint(1)\n",
    "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
    "'''Doc''' ; x = 1\nimport torch\n",
]
REQUESTS = [
    [("torch", None, None)],
    [("torch_npu", None, None)],
    [("torch.distributed", None, None)],
    [("torch.utils.data.distributed", "DistributedSampler", None)],
    [("torch", "amp", None), ("torch.utils.data", "DataLoader", None)],
    [("torch.amp", "GradScaler", "Scaler"), ("os", None, None)],
]


def _visitor(requests) -> AddImportsVisitor:
    context = CodemodContext()
    for module, obj, asname in requests:
        AddImportsVisitor.add_needed_import(context, module, obj, asname)
    return AddImportsVisitor(context)


@pytest.mark.parametrize("requests", REQUESTS, ids=str)
@pytest.mark.parametrize("source", MODULES)
def test_head_only_equals_whole_module(source, requests):
    module = cst.parse_module(source)
    whole = engine._run_codemod(_visitor(requests), module).code
    assert engine.add_imports_at_top(_visitor(requests), module).code == whole


def test_most_cases_add_something():
    changed = sum(
        engine._run_codemod(_visitor(r), cst.parse_module(s)).code != s for s in MODULES for r in REQUESTS
    )
    assert changed > len(MODULES) * len(REQUESTS) * 3 // 4
