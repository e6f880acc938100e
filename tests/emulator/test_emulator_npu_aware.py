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
