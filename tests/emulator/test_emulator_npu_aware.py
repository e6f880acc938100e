"""Issue 22's crash shapes on the emulated NPU: the original runs there, and so does the
migrated code (before the fix the migration sent the NPU into `torch.cuda.Stream` and
read `major` from NPU device properties)."""

from __future__ import annotations

import pytest

from npu_migrate.python.engine import migrate_source

from .conftest import SCRIPTS, json_report, run_emulated

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_npu_aware_code_still_runs_after_migration(emulator_build, tmp_path):
    source = (SCRIPTS / "npu_aware_shapes.py").read_bytes()
    result = migrate_source("npu_aware_shapes.py", source)
    assert result.error is None and result.new_source is not None
    migrated = result.new_source.decode()
    assert "import torch_npu" in migrated and 'device=torch.device("npu")' in migrated  # it did migrate
    assert 'self.on_gpu = device.type == "cuda" and torch.cuda.is_available()' in migrated
    assert "torch.cuda.get_device_properties(torch.device(\"cuda\"))" in migrated
    assert "size, on_gpu = x.shape[-1], x.is_cuda" in migrated
    assert {f.rule for f in result.findings} >= {"NPU010", "NPU011"}
    (tmp_path / "migrated.py").write_text(migrated)
    before = json_report(run_emulated(SCRIPTS / "npu_aware_shapes.py"))
    after = json_report(run_emulated(tmp_path / "migrated.py"))
    assert before == {"devices": ["npu:0", "npu:0", "npu:0"], "mode": "generic", "backends": [["math", True]]}
    assert after == before


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("script", "kept", "expected"),
    [
        # `device.type != "cuda"` in front of a capability probe, a device-type list that
        # appends "npu", `torch.cuda if use_cuda else torch.npu` (the earlier migration
        # rewrote the probe's test and crashed in torch.cuda.get_device_capability)
        ("npu_aware_feeder_probe.py", ['if device.type != "cuda":', 'kinds = ["cuda", "xpu"]',
                                       "module = torch.cuda if self.use_cuda else torch.npu"],
         {"devices": ["npu:0", "npu:0", "npu:0"], "pin": True, "fp8": False}),
        # CUDA tests named by an import flag (`or`) and by a warning about apex (the earlier
        # migration kept fused_adam on and called FusedAdam = None)
        ("npu_aware_guarded_optim.py", ["return _triton_found or torch.cuda.is_available()",
                                        "if args.fused_adam and not torch.cuda.is_available():"],
         {"optimizer": "Adam", "triton": False, "out": "npu:0"}),
    ],
)
def test_held_out_shapes_still_run_after_migration(emulator_build, tmp_path, script, kept, expected):
    result = migrate_source(script, (SCRIPTS / script).read_bytes())
    assert result.error is None and result.new_source is not None
    migrated = result.new_source.decode()
    assert "import torch_npu" in migrated
    for line in kept:
        assert line in migrated
    (tmp_path / script).write_text(migrated)
    before = json_report(run_emulated(SCRIPTS / script))
    after = json_report(run_emulated(tmp_path / script))
    assert before == expected and after == before
