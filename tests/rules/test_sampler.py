"""NPU501 / NPU502 decisions that depend on project facts or need several files."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.runner import run as run_files
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

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
    result = migrate(source.encode(), False, "NPU501", "NPU502")
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


# -- NPU501: the form that runs with and without a process group ----------------

LOOP = "for epoch in range(2):\n    for b in loader:\n        f(b)\n"


@pytest.mark.parametrize(
    "imports,check,added_import",
    [
        ("import torch.distributed as dist\n", "dist.is_initialized()", False),
        ("from torch import distributed\n", "distributed.is_initialized()", False),
        (
            "from torch.distributed import is_initialized as ready\n",
            "ready()",
            False,
        ),
        ("import torch\n", "torch.distributed.is_initialized()", False),
        ("import torch as T\n", "T.distributed.is_initialized()", False),
        ("import torch.nn.parallel\n", "torch.distributed.is_initialized()", False),
        ("", "torch.distributed.is_initialized()", True),
    ],
)
def test_is_initialized_follows_the_files_imports(imports, check, added_import):
    source = (
        imports
        + "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import DataLoader\n"
        "model = DDP(model)\n"
        "loader = DataLoader(ds, shuffle=True)\n" + LOOP
    )
    out = migrate(source.encode(), False, "NPU501").new_source.decode()
    assert (
        f"train_sampler = DistributedSampler(ds, shuffle=True) if {check} else None\n"
        in out
    )
    assert ("import torch.distributed\n" in out) == added_import
    compile(out, "t.py", "exec")


def test_a_shadowed_alias_is_not_used():
    source = (
        "import torch\n"
        "import torch.distributed as dist\n"
        "from torch.utils.data import DataLoader\n"
        "def run(dist, ds):  # dist: a config, not the module\n"
        "    torch.distributed.init_process_group('nccl')\n"
        "    loader = DataLoader(ds, shuffle=True)\n"
        "    for epoch in range(2):\n"
        "        for b in loader:\n"
        "            f(b)\n"
    )
    out = migrate(source.encode(), False, "NPU501").new_source.decode()
    assert "if torch.distributed.is_initialized() else None" in out
    assert "dist.is_initialized" not in out.replace("torch.distributed.is_", "")


@pytest.mark.parametrize(
    "body,rewritten",
    [
        # initialised in the loader's function, after it: is_initialized() is still False
        ("def main(ds):\n    loader = DataLoader(ds, shuffle=True)\n    dist.init_process_group('nccl')\n", False),
        # initialised before it
        ("def main(ds):\n    dist.init_process_group('nccl')\n    loader = DataLoader(ds, shuffle=True)\n", True),
        # initialised in another function (called first, presumably)
        ("def setup():\n    dist.init_process_group('nccl')\ndef main(ds):\n    loader = DataLoader(ds, shuffle=True)\n", True),
    ],
)
def test_init_after_the_loader_is_reported(body, rewritten):
    source = "import torch.distributed as dist\nfrom torch.utils.data import DataLoader\n" + body
    result = migrate(source.encode(), True, "NPU501")
    assert (result.new_source is not None) == rewritten
    messages = [f.message for f in result.findings]
    assert any("initialised after the loader" in m for m in messages) == (not rewritten)


TRAIN_SCRIPT = """\
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader


def main(distributed, store):
    if distributed:
        dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    data = list(range(12))
    loader = DataLoader(data, batch_size=4, shuffle=True)
    seen = []
    for epoch in range(3):
        seen.append([])
        for batch in loader:
            seen[-1] += batch.tolist()
    return loader, seen
"""


@pytest.mark.parametrize("distributed", [False, True])
def test_migrated_loader_runs_with_and_without_a_process_group(tmp_path, distributed):
    """The rewritten script runs as `python train.py` (no process group: the
    DataLoader shuffles by itself) and under DDP (a DistributedSampler whose
    set_epoch is called every epoch)."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DistributedSampler, RandomSampler

    result = migrate(TRAIN_SCRIPT.encode(), False, "NPU501")
    assert result.findings == []
    out = result.new_source.decode()
    namespace: dict = {}
    exec(compile(out, "train.py", "exec"), namespace)  # noqa: S102 - runs the rule's own output
    torch.manual_seed(0)
    try:
        loader, seen = namespace["main"](distributed, str(tmp_path / "store"))
        expected = DistributedSampler if distributed else RandomSampler
        assert type(loader.sampler) is expected
        if distributed:
            assert loader.sampler.epoch == 2  # set_epoch ran every epoch
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    for order in seen:  # one rank: every sample once per epoch
        assert sorted(order) == list(range(12))
    assert len({tuple(o) for o in seen}) > 1  # a new order each epoch


_KWARGS = ["batch_size=4", "num_workers=2", "drop_last=True", "pin_memory=True"]


@settings(max_examples=30, deadline=None)
@given(
    others=st.lists(st.sampled_from(_KWARGS), unique=True, max_size=4),
    position=st.integers(min_value=0, max_value=4),
    multiline=st.booleans(),
    trailing_comma=st.booleans(),
)
def test_shuffle_becomes_two_keywords_wherever_it_is(others, position, multiline, trailing_comma):
    args = list(others)
    args.insert(min(position, len(args)), "shuffle=True")
    args.insert(0, "ds")
    if multiline:
        call = "DataLoader(\n" + "".join(f"    {a},\n" for a in args)
        call = (call if trailing_comma else call[:-2] + "\n") + ")"
    else:
        call = "DataLoader(" + ", ".join(args) + ("," if trailing_comma else "") + ")"
    source = DDP_HEADER + f"loader = {call}\n" + LOOP
    out = migrate(source.encode(), False, "NPU501").new_source.decode()
    new_call = ast.parse(out).body[-2].value
    keywords = [k.arg for k in new_call.keywords]
    expected = [a.split("=")[0] for a in args[1:]]
    expected[expected.index("shuffle") + 1 : expected.index("shuffle") + 1] = ["sampler"]
    assert keywords == expected
    assert ast.unparse(new_call.keywords[keywords.index("shuffle")].value) == "train_sampler is None"
    assert out.count("\n\n\n") == 0 and " \n" not in out  # no stray blank lines or spaces
    again = migrate(out.encode(), False, "NPU501")
    assert again.new_source is None and again.findings == []


# -- NPU502: guard set_epoch only when the sampler may be missing ---------------

@pytest.mark.parametrize(
    "setup,line",
    [
        ("    sampler = DistributedSampler(ds)\n", "sampler.set_epoch(epoch)"),
        (
            "    sampler = DistributedSampler(ds) if dist.is_initialized() else None\n",
            "if sampler is not None:",
        ),
        (
            "    sampler = None if not dist.is_initialized() else DistributedSampler(ds)\n",
            "if sampler is not None:",
        ),
        (
            "    sampler: Optional[DistributedSampler] = None\n"
            + "    if dist.is_initialized():\n        sampler = DistributedSampler(ds)\n",
            "if sampler is not None:",
        ),
        (
            "    sampler = DistributedSampler(ds, seed=1)\n"
            + "    if cfg.eval:\n        sampler = DistributedSampler(ds, seed=2)\n",
            "sampler.set_epoch(epoch)",
        ),
        (
            "    sampler = SequentialSampler(ds)\n"
            + "    if dist.is_initialized():\n        sampler = DistributedSampler(ds)\n",
            "if isinstance(sampler, DistributedSampler):",
        ),
        (
            "    sampler = DistributedSampler(ds) if dist.is_initialized() else RandomSampler(ds)\n",
            "if isinstance(sampler, DistributedSampler):",
        ),
        (
            # `sampler` is also a parameter: the caller may pass any sampler
            "    if sampler is None:\n        sampler = DistributedSampler(ds)\n",
            "if isinstance(sampler, DistributedSampler):",
        ),
    ],
)
def test_set_epoch_guard(setup, line):
    parameter = ", sampler=None" if "if sampler is None" in setup else ""
    source = (
        "import torch.distributed as dist\n"
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        f"def fit(ds, cfg{parameter}):\n"
        + setup
        + "    loader = DataLoader(ds, sampler=sampler)\n"
        "    for epoch in range(3):\n"
        "        for b in loader:\n"
        "            f(b)\n"
    )
    out = migrate(source.encode(), False, "NPU502").new_source.decode()
    first = out.split("    for epoch in range(3):\n", 1)[1].splitlines()[0].strip()
    assert first == line
    assert out.count("set_epoch(epoch)") == 1


def test_attribute_sampler_set_to_none_elsewhere_is_guarded():
    source = (
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        "class T:\n"
        "    def __init__(self):\n        self.sampler = None\n"
        "    def fit(self, ds):\n"
        "        self.sampler = DistributedSampler(ds)\n"
        "        loader = DataLoader(ds, sampler=self.sampler)\n"
        "        for epoch in range(3):\n"
        "            for b in loader:\n"
        "                f(b)\n"
    )
    out = migrate(source.encode(), False, "NPU502").new_source.decode()
    assert (
        "        for epoch in range(3):\n"
        "            if self.sampler is not None:\n"
        "                self.sampler.set_epoch(epoch)\n"
    ) in out
