"""``ProjectFacts.calls_set_epoch`` (NPU502 trusts another file's ``set_epoch``) counts
only calls on something other than a sampler the file builds itself: the tool's own
NPU501/510/511 output calls ``set_epoch`` on the sampler it adds, and counting that made a
second run lose another file's NPU502 finding (a hypothesis example in CI)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from npu_migrate.pipeline.facts import ProjectFacts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"


def test_a_second_run_keeps_the_finding_of_another_files_sampler(tmp_path, run_cli):
    shutil.copy(FIXTURES / "NPU502" / "other_sampler.unchanged.py", tmp_path / "trainer.py")
    shutil.copy(FIXTURES / "NPU510" / "checkpoint_directory.before.py", tmp_path / "cifar.py")
    first = run_cli("--write", "--no-cache", ".")
    assert ".set_epoch(epoch)" in (tmp_path / "cifar.py").read_text()  # NPU510 wrote one
    second = run_cli("--no-cache", ".")
    finding = "trainer.py:8:28: NPU502 DistributedSampler.set_epoch is never called in this project"
    assert finding in first.output and finding in second.output


@pytest.mark.parametrize(("source", "counts"), [
    (b"sampler = DistributedSampler(ds) if on else None\nif sampler is not None:\n    sampler.set_epoch(e)\n", False),
    (b"self.sampler = DistributedSampler(ds)\nself.sampler.set_epoch(e)\n", False),
    (b"loader.sampler.set_epoch(epoch)\n", True),                     # a sampler built elsewhere
    (b"sampler = build_sampler()\nsampler.set_epoch(epoch)\n", True),
    (b"for b in loader: loader.sampler.set_epoch(0)\n", True),        # not a receiver alone on its line
])
def test_which_calls_count(source, counts):
    assert ProjectFacts.scan([source]).calls_set_epoch is counts
