"""Focused tests for the AMP rules (NPU3xx) beyond the golden fixtures."""

from __future__ import annotations

import importlib

import pytest
from npu_migrate.rules.amp._common import MODULES, TARGETS

from ._run import run


def _exists(dotted: str) -> bool:
    module, _, name = dotted.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def test_every_target_exists_in_torch():
    for _, target in TARGETS.values():
        assert _exists(target), target
    for target in MODULES.values():
        importlib.import_module(target)


@pytest.mark.parametrize(
    "call,expected",
    [
        ("autocast()", 'autocast("npu")'),
        ("autocast(False)", 'autocast("npu", enabled=False)'),
        ("autocast(True, torch.float16, False)", 'autocast("npu", enabled=True, dtype=torch.float16, cache_enabled=False)'),
        ("autocast(enabled=flag, **extra)", 'autocast("npu", enabled=flag, **extra)'),
    ],
)
def test_autocast_positional_arguments_become_keywords(call, expected):
    out, findings = run(f"import torch\nfrom torch.cuda.amp import autocast\nwith {call}:\n    pass\n", "NPU301")
    assert f"with {expected}:" in out and "from torch.amp import autocast" in out
    assert findings == []


def test_autocast_with_star_args_is_reported():
    source = "import torch\nwith torch.cuda.amp.autocast(*flags):\n    pass\n"
    out, findings = run(source, "NPU301")
    assert out == source and [f.line for f in findings] == [2]


@pytest.mark.parametrize(
    "decorator,expected",
    [
        ("@custom_bwd", '@custom_bwd(device_type="npu")'),
        ("@custom_fwd(cast_inputs=torch.float32)", '@custom_fwd(device_type="npu", cast_inputs=torch.float32)'),
        ("@custom_fwd(cast_inputs=torch.float32,)", '@custom_fwd(device_type="npu", cast_inputs=torch.float32,)'),
    ],
)
def test_custom_fwd_bwd_forms(decorator, expected):
    source = f"import torch\nfrom torch.cuda.amp import custom_fwd, custom_bwd\n{decorator}\ndef f(ctx, x):\n    return x\n"
    out, _ = run(source, "NPU301")
    assert expected in out and "from torch.amp import custom_fwd, custom_bwd" in out
    compile(out, "out.py", "exec")


def test_custom_fwd_called_on_a_function():
    out, _ = run("import torch\nf = torch.cuda.amp.custom_fwd(g)\n", "NPU301")
    assert 'f = torch.amp.custom_fwd(g, device_type="npu")' in out


def test_mixed_from_import_is_reported_whole():
    source = "from torch.cuda.amp import autocast, common\nwith autocast():\n    pass\n"
    out, findings = run(source, "NPU301")
    assert out == source and {f.line for f in findings} == {1, 2}


def test_shadowing_local_is_not_touched():
    source = "def f(autocast):\n    with autocast():\n        pass\n"
    assert run(source, "NPU301")[0] == source


def test_gpu_state_helpers_keep_explicit_devices():
    source = "import torch\nx = torch.is_autocast_enabled(device_type)\ntorch.set_autocast_enabled('cpu', True)\n"
    assert run(source, "NPU302")[0] == source
