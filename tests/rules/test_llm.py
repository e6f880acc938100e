"""The LLM-stack rules (rules/llm, NPU920-NPU942) beyond their golden fixtures:
properties over their shell and config fixtures mixed with unrelated input, and
the files of the stack that must parse (JSONC, git-tracked files that
.gitignore hides)."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.configs.engine import migrate as migrate_config
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source as migrate_python
from npu_migrate.shell.engine import migrate as migrate_shell

ALL = Settings(selection=Selection.create(["ALL"]))
ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "rules"
SHELL = sorted(p for d in ("NPU935", "NPU936", "NPU937", "NPU938") for p in (ROOT / d).glob("*.sh")
               if ".after." not in p.name)
CONFIGS = sorted(p for d in ("NPU940", "NPU941", "NPU942") for p in (ROOT / d).iterdir()
                 if ".after." not in p.name)


def _messages(result) -> Counter:
    return Counter((f.rule, f.message) for f in result.findings)


# -- shell: unrelated statements, idempotence, stable findings ---------------------

neutral = st.sampled_from([
    "export OUT=/data/run1", "LR=2e-5", 'echo "training $OUT"', "mkdir -p \"$OUT\"",
    "python train.py --bf16 True --lr 1e-4", "torchrun --nproc_per_node 8 train.py --optim adamw_torch",
    "deepspeed train.py --deepspeed ds.json --gradient_checkpointing True", "module load anaconda3",
    "# the tf32 note: HF32 on Ascend", "accelerate launch train.py --mixed_precision bf16",
])


def _statements(data: bytes) -> list[bytes]:
    out: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if out and out[-1].rstrip(b"\r\n").endswith(b"\\"):
            out[-1] += line
        else:
            out.append(line)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SHELL), min_size=1, max_size=3, unique=True), st.lists(neutral, max_size=6),
       st.randoms(use_true_random=False))
def test_shell_mixes_keep_unrelated_lines_converge_and_report_the_same(fixtures, extra, random):
    blocks = [b"".join(_statements(p.read_bytes())) for p in fixtures] + [(s + "\n").encode() for s in extra]
    random.shuffle(blocks)
    data = b"".join(blocks)
    first = migrate_shell("run.sh", data, ALL)
    assert first.error is None
    output = first.new_source if first.new_source is not None else data
    for line in extra:  # unrelated input is never touched
        assert (line + "\n").encode() in output
    second = migrate_shell("run.sh", output, ALL)
    assert second.new_source is None, "a second run changed the script again"
    assert _messages(second) == _messages(first)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(neutral, min_size=1, max_size=8))
def test_scripts_without_llm_switches_are_untouched(lines):
    data = ("#!/bin/bash\n" + "\n".join(lines) + "\n").encode()
    result = migrate_shell("run.sh", data, Settings(selection=Selection.create(["NPU93"])))
    assert result.new_source is None and result.findings == []


# -- Python: tf32 set outside a call (NPU921) ----------------------------------------

TF32 = Settings(selection=Selection.create(["NPU921"]))
python_neutral = st.sampled_from([
    "tf32 = True", "args.tf32 = False", "args.tf32 = use_tf32", "config.tf32_matmul = True",
    'setattr(args, "tf32", flag)', "args.bf16 = True", 'kwargs["tf32"] = None', "x = 1",
    'print("set tf32 = True on Ampere")',
])
tf32_sets = st.sampled_from(["training_args.tf32 = True", "args.tf32 = True", 'kwargs["tf32"] = True',
                             'setattr(training_args, "tf32", True)', "self.args.tf32 = True"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(python_neutral, max_size=6), st.lists(tf32_sets, max_size=3), st.booleans())
def test_tf32_assignments_become_false_and_nothing_else_moves(extra, sets, reads_flag):
    lines = ["from transformers import TrainingArguments", *extra, *sets]
    if reads_flag:
        lines.append("torch.backends.cuda.matmul.allow_tf32 = args.tf32")
    data = ("\n".join(lines) + "\n").encode()
    first = migrate_python("train.py", data, TF32)
    assert first.error is None
    output = first.new_source if first.new_source is not None else data
    for line in extra:  # unrelated statements are never touched
        assert (line + "\n").encode() in output
    if reads_flag:  # the project reads the flag itself: reported, not changed
        assert first.new_source is None and len(first.findings) == len(sets)
    else:
        assert output.count(b"True") == data.count(b"True") - len(sets) and first.findings == []
    second = migrate_python("train.py", output, TF32)
    assert second.new_source is None, "a second run changed the script again"
    assert _messages(second) == _messages(first)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tf32_sets, min_size=1, max_size=3), st.lists(python_neutral, max_size=4))
def test_tf32_assignments_outside_hf_files_are_untouched(sets, extra):
    data = ("import argparse\n" + "\n".join([*extra, *sets]) + "\n").encode()
    result = migrate_python("train.py", data, TF32)
    assert result.new_source is None and result.findings == []


# -- configs: unrelated keys, idempotence, stable findings -------------------------

keys = st.sampled_from(["output_dir", "learning_rate", "seed", "per_device_train_batch_size", "report_to", "notes"])
values = st.sampled_from(["1", "2.0e-5", "none", "out/run", "'tf32 is an Ampere feature'", "true"])


@pytest.mark.parametrize("path", CONFIGS, ids=[f"{p.parent.name}/{p.name}" for p in CONFIGS])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(keys, values, max_size=4))
def test_config_fixtures_with_unrelated_keys(path, extra):
    data = path.read_bytes()
    name = "args.json" if path.suffix == ".json" else "args.yaml"
    if path.suffix == ".json":
        fields = "".join(f'  "x_{k}": "{v}",\n' for k, v in extra.items())
        data = data.replace(b"{\n", ("{\n" + fields).encode(), 1) if data.startswith(b"{\n") else data
    else:
        fields = "".join(f"x_{k}: {v}\n" for k, v in extra.items())
        data = fields.encode() + data
    first = migrate_config(name, data, ALL)
    assert first.error is None, first.error
    output = first.new_source if first.new_source is not None else data
    assert output.startswith(data[: len(fields)]) or path.suffix == ".json"
    assert fields.encode() in output
    second = migrate_config(name, output, ALL)
    assert second.new_source is None
    assert _messages(second) == _messages(first)


# -- JSONC ---------------------------------------------------------------------------

DEVCONTAINER = """// For format details, see https://aka.ms/devcontainer.json.
{
\t"name": "PyTorch",
\t/* an NVIDIA image would keep its CUDA variables (tests/engine/test_round26.py) */
\t"image": "mcr.microsoft.com/devcontainers/python:3.11",
\t"runArgs": ["--ipc=host",],
\t"containerEnv": {
\t\t"CUDA_VISIBLE_DEVICES": "0", // first card
\t\t"WANDB_MODE": "offline",
\t},
}
"""


def test_a_jsonc_devcontainer_no_longer_fails_the_run_and_keeps_its_commas(tmp_path, run_cli):
    folder = tmp_path / ".devcontainer"
    folder.mkdir()
    (folder / "devcontainer.json").write_text(DEVCONTAINER)
    check = run_cli(".", "--check", "--no-cache")
    assert check.exit_code != 2, check.output
    assert "not valid JSON" not in check.output
    run_cli(".", "--write", "--no-cache")
    written = (folder / "devcontainer.json").read_text()
    assert written == DEVCONTAINER.replace('"CUDA_VISIBLE_DEVICES"', '"ASCEND_RT_VISIBLE_DEVICES"')
    assert run_cli(".", "--check", "--no-cache").exit_code == 0


@pytest.mark.parametrize("text", ['{"a": 1,,}', "[,]", '{"a": }', '{"device": "cuda" "x": 1}'])
def test_jsonc_still_refuses_what_is_not_json(text):
    result = migrate_config("a.json", text.encode() + b"  // cuda\n", ALL)
    assert result.error is not None and result.error.startswith("a.json:1: not valid JSON")
    assert result.new_source is None


# -- git-tracked files under .gitignore ------------------------------------------------

@pytest.mark.timeout(120)
def test_a_tracked_file_that_gitignore_matches_is_scanned(tmp_path, run_cli):
    def git(*args):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path, check=True,
                       capture_output=True, timeout=60)

    git("init", "-q")
    (tmp_path / ".gitignore").write_text("configs/\n*.json\nscratch/\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "scratch").mkdir()
    (tmp_path / "configs" / "zero3.json").write_text('{"dist_backend": "nccl"}\n')
    (tmp_path / "local.json").write_text('{"dist_backend": "nccl"}\n')  # ignored, not tracked
    (tmp_path / "scratch" / "try.py").write_text("import torch\nx = torch.zeros(1).cuda()\n")
    git("add", ".gitignore")
    git("add", "-f", "configs/zero3.json")
    git("commit", "-qm", "init")
    result = run_cli(".", "--no-cache")
    assert "configs/zero3.json" in result.output
    assert "local.json" not in result.output and "scratch/try.py" not in result.output
    assert "1 file(s) scanned" in result.output


# -- a LLaVA-shaped project, end to end ----------------------------------------------

def test_a_llava_shaped_project_migrates_and_then_checks_clean(tmp_path, run_cli):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "llava" / "train").mkdir(parents=True)
    (tmp_path / ".devcontainer").mkdir()
    (tmp_path / "scripts" / "finetune.sh").write_text(
        "#!/bin/bash\n\ndeepspeed llava/train/train_mem.py \\\n    --deepspeed ./scripts/zero3.json \\\n"
        "    --bf16 True \\\n    --tf32 True \\\n    --attn_implementation flash_attention_2 \\\n"
        "    --report_to wandb\n")
    (tmp_path / "scripts" / "zero3.json").write_text('{\n  "bf16": {"enabled": "auto"},\n  "zero_optimization": {"stage": 3},\n}\n')
    (tmp_path / "llava" / "train" / "train_mem.py").write_text(
        'from llava.train.train import train\n\nif __name__ == "__main__":\n    train(attn_implementation="flash_attention_2")\n')
    (tmp_path / ".devcontainer" / "devcontainer.json").write_text(DEVCONTAINER)
    first = run_cli(".", "--write", "--no-cache")
    assert "failed" in first.output and ", 0 failed" in first.output, first.output
    assert (tmp_path / "scripts" / "finetune.sh").read_text() == (
        "#!/bin/bash\n\ndeepspeed llava/train/train_mem.py \\\n    --deepspeed ./scripts/zero3.json \\\n"
        "    --bf16 True \\\n    --attn_implementation sdpa \\\n    --report_to wandb\n")
    assert 'train(attn_implementation="sdpa")' in (tmp_path / "llava" / "train" / "train_mem.py").read_text()
    assert (tmp_path / "scripts" / "zero3.json").read_text().endswith('"stage": 3},\n}\n')  # JSONC kept as written
    assert run_cli(".", "--check", "--no-cache").exit_code == 0


def test_shell_and_config_rules_report_where_the_project_has_its_own_attention_classes():
    from dataclasses import replace

    from npu_migrate.pipeline.facts import ProjectFacts

    facts = ProjectFacts.scan([("model.py", b"ATTENTION_CLASSES = {'eager': A, 'flash_attention_2': B}\n")])
    assert facts.custom_flash_attention
    project = replace(ALL, facts=facts)
    launcher = b"torchrun train.py --attn_implementation flash_attention_2\n"
    config = b"attn_implementation: flash_attention_2\n"
    assert migrate_shell("run.sh", launcher, ALL).new_source == launcher.replace(b"flash_attention_2", b"sdpa")
    assert migrate_config("args.yaml", config, ALL).new_source == config.replace(b"flash_attention_2", b"sdpa")
    for result in (migrate_shell("run.sh", launcher, project), migrate_config("args.yaml", config, project)):
        assert result.new_source is None
        assert [f.rule for f in result.findings] in (["NPU936"], ["NPU940"])


# -- Markdown: README commands reported, never rewritten ------------------------------

ALPACA_README = """# Stanford Alpaca

Below is a command that fine-tunes LLaMA-7B:

```bash
torchrun --nproc_per_node=4 --master_port=<your_random_port> train.py \\
    --model_name_or_path <your_path_to_hf_converted_llama_ckpt_and_tokenizer> \\
    --bf16 True \\
    --optim adamw_bnb_8bit \\
    --tf32 True
```

- a list item with its own block:

  ```sh
  python train.py --tf32=true --seed 1
  ```

Inline `--tf32 True` and indented code are not commands:

    torchrun train.py --tf32 True

```python
args = TrainingArguments(tf32=True)
```

```console
$ python train.py --tf32 True
ValueError: --tf32 requires Ampere or a newer GPU arch
```
"""


def test_readme_commands_are_reported_at_their_lines_and_the_file_is_not_written(tmp_path, run_cli):
    from npu_migrate.markdown.engine import migrate as migrate_markdown

    result = migrate_markdown("README.md", ALPACA_README.encode(), ALL)
    assert result.new_source is None and result.fixes == [] and result.error is None
    got = sorted((f.line, f.col + 1, f.rule) for f in result.findings)
    assert got == [(9, 5, "NPU937"), (10, 5, "NPU935"), (16, 19, "NPU935"), (28, 19, "NPU935")]
    assert all("left as is" in f.message for f in result.findings)
    readme = tmp_path / "README.md"
    readme.write_bytes(ALPACA_README.encode())
    written = run_cli(".", "--write", "--no-cache")
    assert readme.read_bytes() == ALPACA_README.encode()
    assert "README.md:10:5: NPU935" in written.output and ", 0 failed" in written.output
    assert run_cli(".", "--check", "--no-cache").exit_code == 0  # findings never fail --check
    assert run_cli(".", "--fail-on-findings", "--no-cache").exit_code == 1


prose = st.sampled_from([
    "Some prose about `--tf32 True`.", "    torchrun train.py --tf32 True", "```python\nx = 1\n```",
    "```bash\npython train.py --seed 1\n```", "## Training", "```\nEpoch 1: loss 0.3, launched with --tf32 True\n```",
])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SHELL), max_size=3), st.lists(prose, max_size=5), st.randoms(use_true_random=False))
def test_readmes_report_what_their_blocks_hold_and_never_change(fixtures, extra, random):
    from npu_migrate.markdown.engine import migrate as migrate_markdown

    blocks = [f"```bash\n{p.read_text()}```" for p in fixtures] + list(extra)
    random.shuffle(blocks)
    text = "\n\n".join(["# README", *blocks]) + "\n"
    result = migrate_markdown("README.md", text.encode(), ALL)
    assert result.new_source is None and result.fixes == []
    expected = Counter()
    for p in fixtures:
        shell = migrate_shell("run.sh", p.read_bytes(), ALL)
        expected.update(f.rule for f in [*shell.fixes, *shell.findings])
    assert Counter(f.rule for f in result.findings) == expected  # prose and other fences: nothing
    again = migrate_markdown("README.md", text.encode(), ALL)
    assert _messages(again) == _messages(result)


# -- NPU927: a project's own `kernels` directory is not the Hub package -----------------

SWIN_SHAPE = b"""try:
    from kernels.window_process.window_process import WindowProcess, WindowProcessReverse
except ImportError:
    WindowProcess = None
"""


@pytest.mark.parametrize("local, reported", [
    # Swin-Transformer: kernels/ (no __init__.py) at the root, imported from models/
    ("/p/kernels/window_process/window_process.py", False),
    # a kernels.py module of the project
    ("/p/kernels.py", False),
    # a `kernels` package elsewhere (not beside the importer nor above it): the Hub package
    ("/p/third_party/mylib/kernels/ops.py", True),
])
def test_npu927_project_kernels_directory_is_not_a_hub_kernel(local, reported):
    from dataclasses import replace

    from npu_migrate.pipeline.facts import ProjectFacts

    importer = "/p/models/swin_transformer.py"
    facts = ProjectFacts.scan([(importer, SWIN_SHAPE), (local, b"import torch\n")])
    result = migrate_python(importer, SWIN_SHAPE, replace(ALL, facts=facts))
    assert ("NPU927" in {f.rule for f in result.findings}) is reported
    # without the project file, the same import is the Hub package's
    alone = migrate_python(importer, SWIN_SHAPE, replace(ALL, facts=ProjectFacts.scan([(importer, SWIN_SHAPE)])))
    assert "NPU927" in {f.rule for f in alone.findings}
