"""A launcher's options reach torch only through the script it runs
(npu_migrate/shell/targets.py): a command that runs a script the project does not have
is reported, not rewritten (Medusa's stale ``train_vicuna_7b.sh``, held-out round 17);
a script under torch_npu's ``transfer_to_npu`` keeps its device and backend values, which
torch_npu maps at run time (Open-Sora-Plan, round 15); every other launch is migrated
as before, whatever path the run is given."""

from __future__ import annotations

import pytest

from ._files import write

CONFIG = "import torch\n\ntry:\n    from torch_npu.contrib import transfer_to_npu\nexcept ImportError:\n    pass\n"
TRAIN = "import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--device')\n"


def _project(tmp_path):
    write(tmp_path, "pyproject.toml", "[project]\nname = 'p'\n")
    write(tmp_path, "src/train.py", TRAIN)
    write(tmp_path, "src/npu_config.py", CONFIG)
    write(tmp_path, "src/sample.py", "import npu_config\n" + TRAIN)
    return write(tmp_path, "scripts/run.sh", (
        "python src/train.py --device cuda\n"
        "CUDA_VISIBLE_DEVICES=0 python ../gone/eval_metric.py --device cuda --backend nccl\n"
        "CUDA_VISIBLE_DEVICES=1 python src/sample.py --device cuda:1 --dist-backend nccl\n"
        "python ./../src/train.py --device=cuda:0\n"
        "python /opt/other/train.py --device cuda\n"
        "python -m some_tool --device cuda\n"
    ))


EXPECTED = (
    "python src/train.py --device npu\n"
    "CUDA_VISIBLE_DEVICES=0 python ../gone/eval_metric.py --device cuda --backend nccl\n"
    "ASCEND_RT_VISIBLE_DEVICES=1 python src/sample.py --device cuda:1 --dist-backend nccl\n"
    "python ./../src/train.py --device=npu:0\n"
    "python /opt/other/train.py --device npu\n"
    "python -m some_tool --device npu\n"
)


def test_only_launches_of_project_scripts_not_under_transfer_to_npu_are_rewritten(tmp_path, run_cli):
    script = _project(tmp_path)
    result = run_cli("--write", "--no-cache", ".")
    assert script.read_text() == EXPECTED
    assert "`../gone/eval_metric.py`, the script this command runs, is not in the project" in result.output
    assert "`src/sample.py` runs under torch_npu's transfer_to_npu (it imports `npu_config.py`)" in result.output
    # every rule's edit in the stale command is a finding, at its own line
    line_two = [line for line in result.output.splitlines() if "run.sh:2:" in line]
    for rule in ("NPU801", "NPU803", "NPU804"):
        assert any(f" {rule} " in line and "left, because" in line for line in line_two), rule


@pytest.mark.parametrize("given", ["scripts/run.sh", "scripts", "."])
def test_the_answer_does_not_depend_on_the_paths_given(tmp_path, run_cli, given):
    script = _project(tmp_path)
    run_cli("--write", "--no-cache", given)
    assert script.read_text() == EXPECTED


def test_a_second_run_changes_nothing_and_reports_the_same(tmp_path, run_cli):
    _project(tmp_path)
    first = run_cli("--write", "--no-cache", ".")
    second = run_cli("--no-cache", ".")
    left = [line for line in first.output.splitlines() if "left, because" in line]
    assert left and left == [line for line in second.output.splitlines() if "left, because" in line]
    assert "0 would change" in second.output


def test_tf32_is_removed_only_where_transformers_parses_the_command_line(tmp_path, run_cli):
    """LLM-Shearing's fire-based ``inference.py`` takes its own ``--tf32`` (held-out round 18):
    reported; a script that parses TrainingArguments, or one the tool cannot see, loses it."""
    write(tmp_path, "pyproject.toml", "[project]\nname = 'p'\n")
    write(tmp_path, "sft.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    write(tmp_path, "inference.py", "import fire\n\n\ndef main(tf32=False):\n    pass\n")
    script = write(tmp_path, "run.sh", (
        "torchrun sft.py --bf16 True --tf32 True\n"
        "python inference.py --tf32 True\n"
        "python $ROOT/train.py --tf32 True\n"
    ))
    result = run_cli("--write", "--no-cache", ".")
    assert script.read_text() == (
        "torchrun sft.py --bf16 True\n"
        "python inference.py --tf32 True\n"
        "python $ROOT/train.py\n"
    )
    assert "passed to `inference.py`, which names neither TrainingArguments nor HfArgumentParser" in result.output
