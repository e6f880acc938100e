"""NPU501 / NPU502 decisions that depend on project facts or need several files."""

from __future__ import annotations

import pytest

from npu_migrate.engine import migrate_source
from npu_migrate.facts import ProjectFacts
from npu_migrate.runner import run as run_files
from npu_migrate.selection import Selection
from npu_migrate.settings import Settings

SAMPLER_HERE = b"""\
from torch.utils.data import DataLoader, DistributedSampler


def build(dataset):
    sampler = DistributedSampler(dataset)
    return DataLoader(dataset, batch_size=8, sampler=sampler)
"""

LOOP_ELSEWHERE = b"""\
def fit(loader, epochs):
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for batch in loader:
            step(batch)
"""


def migrate(data: bytes, calls_set_epoch: bool, *codes: str):
    settings = Settings(
        selection=Selection.create(list(codes)),
        facts=ProjectFacts(calls_set_epoch=calls_set_epoch),
    )
    result = migrate_source("t.py", data, settings)
    assert result.error is None
    return result


@pytest.mark.parametrize("calls_set_epoch,expected", [(True, []), (False, [5])])
def test_sampler_without_loop_depends_on_the_project(calls_set_epoch, expected):
    result = migrate(SAMPLER_HERE, calls_set_epoch, "NPU502")
    assert result.new_source is None
    assert [f.line for f in result.findings] == expected


def test_loop_in_the_same_file_is_fixed_whatever_the_project_does():
    data = SAMPLER_HERE.replace(
        b"    return DataLoader(dataset, batch_size=8, sampler=sampler)\n",
        b"    loader = DataLoader(dataset, batch_size=8, sampler=sampler)\n"
        b"    for epoch in range(3):\n        for batch in loader:\n            step(batch)\n",
    )
    for calls in (True, False):
        result = migrate(data, calls, "NPU502")
        assert (
            b"    for epoch in range(3):\n        sampler.set_epoch(epoch)\n"
            in result.new_source
        )
        assert result.findings == []


def test_project_facts_come_from_the_other_files(tmp_path):
    here = tmp_path / "data.py"
    here.write_bytes(SAMPLER_HERE)
    settings = Settings(selection=Selection.create(["NPU502"]))
    alone = run_files([str(here)], settings)
    assert [f.rule for r in alone for f in r.findings] == ["NPU502"]
    (tmp_path / "train.py").write_bytes(LOOP_ELSEWHERE)
    together = run_files([str(here), str(tmp_path / "train.py")], settings)
    assert [f.rule for r in together for f in r.findings] == []


DDP_HEADER = """\
import torch.distributed as dist
from torch.utils.data import DataLoader

dist.init_process_group("hccl")
"""


@pytest.mark.parametrize(
    "body,placed",
    [
        # nested epoch/step loops: the outer loop over the loader is the epoch loop
        (
            "for epoch in range(3):\n    for step in range(2):\n        for b in loader:\n            f(b)\n",
            1,
        ),
        # the loader is rebuilt inside the loop: no safe place, reported
        (
            "for epoch in range(3):\n    loader2 = loader\n    for b in loader2:\n        f(b)\n",
            0,
        ),
        # a loop variable that is not an epoch and only passes the loader on
        ("for i in range(3):\n    run(loader)\n", 0),
        # `_` as the loop variable
        ("for _ in range(3):\n    for b in loader:\n        f(b)\n", 0),
        # one-line body
        ("for epoch in range(3): run(loader)\n", 0),
        # the loop comes before the loader
        ("", 0),
    ],
)
def test_epoch_loop_detection(body, placed):
    source = DDP_HEADER + "loader = DataLoader(ds, shuffle=True)\n" + body
    result = migrate(source.encode(), False, "NPU501")
    out = result.new_source.decode()
    assert out.count("train_sampler.set_epoch(epoch)") == placed
    assert len(result.findings) == 1 - placed
    assert "sampler=train_sampler" in out


def test_sampler_names_do_not_clash():
    source = DDP_HEADER + (
        "train_sampler = None\n"
        "val_loader = DataLoader(val_set, shuffle=True)\n"
        "loader = DataLoader(ds, shuffle=True)\n"
        "other = DataLoader(ds, shuffle=True)\n"
    )
    out = migrate(source.encode(), True, "NPU501").new_source.decode()
    assert "val_sampler = DistributedSampler(val_set, shuffle=True)" in out
    assert "train_sampler2 = DistributedSampler(ds, shuffle=True)" in out
    assert "train_sampler3 = DistributedSampler(ds, shuffle=True)" in out


def test_existing_sampler_import_is_reused():
    source = (
        DDP_HEADER.replace(
            "from torch.utils.data import DataLoader\n",
            "from torch.utils.data import DataLoader, DistributedSampler as DSampler\n",
        )
        + "loader = DataLoader(ds, shuffle=True)\n"
    )
    out = migrate(source.encode(), True, "NPU501").new_source.decode()
    assert "train_sampler = DSampler(ds, shuffle=True)" in out
    assert "import DistributedSampler\n" not in out


def test_local_class_named_distributed_sampler_is_not_shadowed():
    source = (
        DDP_HEADER
        + "class DistributedSampler:\n    pass\nloader = DataLoader(ds, shuffle=True)\n"
    )
    result = migrate(source.encode(), True, "NPU501")
    assert result.new_source is None
    assert [f.rule for f in result.findings] == ["NPU501"]
