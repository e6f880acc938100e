"""NPU701 goes into training entry points only (see the rule's rationale): never
into tests, scripts that do not train, or files whose migration needs no NPU."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

SETTINGS = Settings(selection=Selection.create(["NPU1", "NPU2", "NPU402", "NPU701"]))

TRAIN = """\
import torch


def main():
    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.zeros(1, 4).cuda()).sum().backward()
    optimizer.step()


if __name__ == "__main__":
    main()
"""

EVALUATE = """\
import torch


def main():
    model = torch.load("model.pt").cuda().eval()
    with torch.no_grad():
        print(model(torch.zeros(1, 4).cuda()))


if __name__ == "__main__":
    main()
"""

LOAD_ONLY = """\
import torch


def main():
    model = build(torch.load("checkpoint.pt"))
    model(batch).sum().backward()
    optimizer.step()


if __name__ == "__main__":
    main()
"""

PYTEST_MODULE = "import pytest\n" + TRAIN
UNITTEST_MODULE = "import unittest\n\nclass T(unittest.TestCase):\n    pass\n" + TRAIN

LAUNCHER = """\
import torch
import torch.distributed as dist
from trainer import fit


if __name__ == "__main__":
    dist.init_process_group("nccl")
    torch.cuda.set_device(0)
    fit()
"""


def injected(path: str, source: str) -> bool:
    result = migrate_source(path, source.encode(), SETTINGS)
    assert result.error is None, result.error
    output = (result.new_source or b"").decode()
    assert ("NPU701" in {f.rule for f in result.fixes}) == ("npu_runtime.install()" in output)
    return "npu_runtime.install()" in output


def test_a_training_entry_point_gets_it():
    assert injected("train.py", TRAIN)


def test_a_distributed_launcher_gets_it():
    assert injected("launch.py", LAUNCHER)


@pytest.mark.parametrize("path", ["test_train.py", "train_test.py", "conftest.py", "tests/smoke.py",
                                  "project/test/run.py", "testing/train.py"])
def test_test_modules_by_name_never_get_it(path):
    assert not injected(path, TRAIN)


@pytest.mark.parametrize("source", [PYTEST_MODULE, UNITTEST_MODULE], ids=["pytest", "unittest"])
def test_test_modules_by_content_never_get_it(source):
    assert not injected("check_training.py", source)


def test_a_script_that_does_not_train_does_not_get_it():
    assert not injected("evaluate.py", EVALUATE)


BENCHMARK = """\
import time

import torch


def time_backward(model, x):
    out = model(x).sum()
    torch.cuda.synchronize()
    start = time.perf_counter()
    out.backward()
    torch.cuda.synchronize()
    return time.perf_counter() - start


if __name__ == "__main__":
    print(time_backward(torch.nn.Linear(4, 4).cuda(), torch.ones(2, 4).cuda()))
"""


@pytest.mark.parametrize("step", ["", "optimizer.step()", "scaler.step(optimizer)", "engine.step()"])
def test_a_backward_pass_trains_only_with_a_step(step):
    """A backward pass that no step follows times kernels or checks gradients (lingua's
    index_matmul.py, prime-rl's bench_fused_moe.py): migrated, without the runtime."""
    source = BENCHMARK.replace("    out.backward()\n", f"    out.backward()\n    {step}\n" if step else "    out.backward()\n")
    result = migrate_source("bench_backward.py", source.encode(), SETTINGS)
    assert result.new_source is not None and b"torch.npu.synchronize()" in result.new_source
    assert injected("bench_backward.py", source) == bool(step)


def test_a_file_whose_migration_needs_no_npu_does_not_get_it():
    result = migrate_source("train.py", LOAD_ONLY.encode(), SETTINGS)
    assert result.new_source is not None and b'map_location="cpu"' in result.new_source
    assert b"npu_runtime" not in result.new_source


def test_a_top_level_loop_that_calls_the_files_training_function_gets_it():
    source = (
        "import torch\n\nmodel = Net().cuda()\n\n\ndef train(epoch):\n    loss = model(batch).sum()\n    loss.backward()\n"
        "    optimizer.step()\n\n\n"
        "for epoch in range(10):\n    train(epoch)\n"
    )
    assert injected("main.py", source)


def test_a_top_level_loop_that_does_not_train_does_not_get_it():
    source = (
        "import torch\n\nmodel = Net().cuda()\n\n\ndef train(epoch):\n    model(batch).sum().backward()\n\n\n"
        "for name in ('a', 'b'):\n    register(name)\n"
    )
    assert not injected("registry.py", source)


def test_a_hogwild_launcher_gets_it():
    source = (
        "import torch\nimport torch.multiprocessing as mp\nfrom train import train\n\n\n"
        "if __name__ == '__main__':\n    model = Net().cuda()\n    model.share_memory()\n"
        "    processes = [mp.Process(target=train, args=(rank, model)) for rank in range(4)]\n"
    )
    assert injected("main.py", source)


@pytest.mark.parametrize("guarded", [True, False])
def test_a_named_entry_point_with_no_cuda_of_its_own_gets_it(tmp_path, guarded):
    """`tools/train.py` whose training (and every CUDA line) is in an imported module:
    named with --entry / entry-points, it gets the call although no other rule changes
    it (and although the prefilter finds no CUDA word in it); unnamed, it is left alone."""
    from dataclasses import replace

    from npu_migrate.pipeline.facts import ProjectFacts

    body = "from mylib.trainer import run\n\n"
    body += "if __name__ == '__main__':\n    run({'epochs': 1})\n" if guarded else "run({'epochs': 1})\n"
    path = tmp_path / "train.py"
    named = replace(SETTINGS, facts=ProjectFacts(entry_points=(str(path),)))
    result = migrate_source(str(path), body.encode(), named)
    assert result.error is None and result.new_source is not None
    text = result.new_source.decode()
    assert "import npu_runtime" in text and text.count("npu_runtime.install()") == 1
    assert [f.rule for f in result.fixes] == ["NPU701"]
    again = migrate_source(str(path), result.new_source, named)
    assert again.new_source is None  # idempotent
    assert migrate_source(str(path), body.encode(), SETTINGS).new_source is None


SCRIPT_USING_TRAINING_CODE = """\
import torch

from engine import helpers


def main():
    model = helpers.build().cuda()
    print(model(torch.zeros(1, 4).cuda()))


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("name,extra,installed", [
    ("main.py", "", True),  # ConvNeXt's shape: trains through engine.py
    ("gen_img.py", "", False),  # sd-scripts: generation, importing train_util for helpers
    ("anima_minimal_inference.py", "", False),
    ("sample.py", "", False),
    ("main.py", "\nprompt = input()\n", False),  # an interactive session: the watchdog would end it idle
])
def test_a_script_that_trains_through_an_import_unless_it_generates_serves_or_prompts(tmp_path, name, extra, installed):
    from dataclasses import replace

    from npu_migrate.pipeline.facts import ProjectFacts

    engine = tmp_path / "engine.py"
    engine.write_text("def train(model, opt):\n    model().backward()\n    opt.step()\n")
    script = tmp_path / name
    script.write_text(SCRIPT_USING_TRAINING_CODE + extra)
    facts = ProjectFacts.scan([(str(engine), engine.read_bytes()), (str(script), script.read_bytes())])
    assert str(script) in facts.imports_training
    result = migrate_source(str(script), script.read_bytes(), replace(SETTINGS, facts=facts))
    assert result.new_source is not None
    assert ("npu_runtime.install()" in result.new_source.decode()) is installed
