"""The shell front end beyond the golden fixtures: properties over generated
scripts, suppression and --annotate across continuation lines, odd bytes, and
the parser evaluation's hard cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.shell.engine import migrate

ALL = Settings(selection=Selection.create(["ALL"]))
FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "rules").glob("NPU80*/*.before.sh"))


def run(source: str | bytes, settings: Settings = ALL, path: str = "run.sh"):
    data = source.encode() if isinstance(source, str) else source
    result = migrate(path, data, settings)
    assert result.error is None
    return result


# -- generated scripts -----------------------------------------------------------

names = st.sampled_from(["DATA_DIR", "OUT", "LR", "EPOCHS", "MASTER_PORT", "HCCL_CONNECT_TIMEOUT", "CUDA", "nccl_log"])
values = st.sampled_from(["1", "0.001", "/data/x", "gloo", "cpu", "npu:0", "hccl", "'a b'", '"$OUT/x"', "${LR:-1}"])
words = st.sampled_from(["train.py", "--lr", "$LR", '"$DATA_DIR"', "--device", "cpu", "--backend", "gloo", "-x",
                         "--out=$OUT", "'cuda is prose here'", '"nccl in a message"', "2>&1"])
prose = st.sampled_from(["the GPU run uses cuda", "NCCL_DEBUG=INFO helps", "nvidia-smi shows GPUs",
                         "set CUDA_VISIBLE_DEVICES", "--backend nccl", "torch.distributed.launch is old"])


@st.composite
def statement(draw) -> str:
    form = draw(st.integers(0, 8))
    if form == 0:
        return f"{draw(names)}={draw(values)}"
    if form == 1:
        return f"export {draw(names)}={draw(values)}"
    if form == 2:
        return f'echo "{draw(prose)}"'
    if form == 3:
        return f"# {draw(prose)}"
    if form == 4:
        program = draw(st.sampled_from(["python", "torchrun --nproc_per_node 2", "deepspeed", "srun python"]))
        return program + " " + " ".join(draw(st.lists(words, max_size=6)))
    if form == 5:
        return "python train.py \\\n    " + " \\\n    ".join(draw(st.lists(words, min_size=1, max_size=4)))
    if form == 6:
        return f"cat <<'EOF'\n{draw(prose)}\n$CUDA_VISIBLE_DEVICES\nEOF"
    if form == 7:
        return f'if [ "${draw(names)}" = "{draw(values)}" ]; then\n    echo \'{draw(prose)}\'\nfi'
    return f"printf '%s\\n' '{draw(prose)}' | tee -a log.txt"


@st.composite
def script(draw) -> bytes:
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    body = "\n".join(draw(st.lists(statement(), min_size=1, max_size=12)))
    return ("#!/bin/bash\n" + body + "\n").replace("\n", newline).encode()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script())
def test_scripts_without_cuda_isms_are_left_byte_identical(data):
    result = run(data)
    assert result.new_source is None
    assert result.fixes == [] and result.findings == []


def _statements(data: bytes) -> list[bytes]:
    """A fixture's lines, continuation lines kept with their command."""
    out: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if out and out[-1].rstrip(b"\r\n").endswith(b"\\"):
            out[-1] += line
        else:
            out.append(line)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FIXTURES), min_size=1, max_size=3, unique=True), st.randoms(use_true_random=False),
       st.lists(statement(), max_size=6))
def test_a_second_run_changes_nothing_and_reports_the_same(fixtures, random, extra):
    blocks = [b"".join(_statements(p.read_bytes())) for p in fixtures] + [(s + "\n").encode() for s in extra]
    random.shuffle(blocks)
    data = b"".join(blocks)
    first = run(data)
    output = first.new_source if first.new_source is not None else data
    second = run(output)
    assert second.new_source is None
    assert [(f.line, f.rule, f.message) for f in second.findings] == [(f.line, f.rule, f.message) for f in first.findings]


# -- behaviour the fixtures cannot show -----------------------------------------

def test_an_own_line_suppression_covers_the_whole_continued_command():
    source = (
        "# npu-migrate: ignore[NPU803]\n"
        "torchrun train.py \\\n    --backend nccl \\\n    --device cuda\n"
        "python train.py --backend nccl\n"
    )
    out = run(source).new_source.decode()
    assert "    --backend nccl \\\n    --device npu\n" in out  # NPU804 still applies
    assert out.endswith("python train.py --backend hccl\n")


def test_annotate_goes_above_the_first_line_of_a_continued_command():
    source = "export A=1\ntorchrun train.py \\\n    --x 1 && \\\n  nvidia-smi -L\n"
    annotate = Settings(selection=Selection.create(["ALL"]), annotate=True)
    out = run(source, annotate).new_source
    note, rest = out.split(b"\ntorchrun", 1)
    assert note.startswith(b"export A=1\n# npu-migrate: NPU805 `nvidia-smi` with options is NVIDIA-only; `npu-smi` "
                           b"has other options and output; suggestion: on Ascend `npu-smi info`")
    assert b"\n" not in note.split(b"\n", 1)[1]  # the comment is one line, above the command's first line
    assert rest == b" train.py \\\n    --x 1 && \\\n  nvidia-smi -L\n"
    assert run(out, annotate).new_source is None


def test_bytes_that_are_not_utf8_survive():
    data = b"# caf\xe9\nexport CUDA_VISIBLE_DEVICES=0 # \xff\xfe\n"
    assert run(data).new_source == b"# caf\xe9\nexport ASCEND_RT_VISIBLE_DEVICES=0 # \xff\xfe\n"


def test_a_binary_file_named_sh_is_not_a_crash():
    result = run(b"\x7fELF\x00\x01CUDA_VISIBLE_DEVICES\x00\xff" * 20)
    assert result.new_source is None


def test_a_bom_is_kept():
    assert run(b"\xef\xbb\xbfexport NCCL_SOCKET_IFNAME=^docker0\n").new_source == b"\xef\xbb\xbfexport HCCL_SOCKET_IFNAME=^docker0\n"


def test_selection_and_per_file_ignores_apply():
    source = "export CUDA_VISIBLE_DEVICES=0\npython t.py --backend nccl\n"
    only = Settings(selection=Selection.create(["NPU803"]))
    assert run(source, only).new_source == b"export CUDA_VISIBLE_DEVICES=0\npython t.py --backend hccl\n"
    ignored = Settings(selection=Selection.create(["ALL"], per_file_ignores={"scripts/*": ["NPU8"]}))
    assert run(source, ignored, path="scripts/run.sh").new_source is None


def test_values_behind_expansions_are_left_to_their_assignment():
    source = 'PREFIX=cu\npython t.py --device="${PREFIX}da:0" --backend "$(cat backend.txt)"\n'
    assert run(source).new_source is None


def test_noqa_with_an_npu_code_suppresses_in_shell_too():
    source = "export CUDA_VISIBLE_DEVICES=0  # noqa: SC2034, NPU801\nexport NCCL_DEBUG=INFO  # noqa\n"
    result = run(source)
    assert result.new_source is None and [f.rule for f in result.findings] == ["NPU802"]


def test_launch_suggestion_shows_the_migrated_command_line():
    """NPU806's torchrun suggestion is the command line as the other rules leave it:
    copying it after --write must not bring back `nccl` / `cuda` (NPU803, NPU804)."""
    script = ("python -m torch.distributed.launch --nproc_per_node=8 --use_env train.py "
              "--dist-backend nccl --device=cuda --log-name cuda_run\n")
    result = run(script)
    (finding,) = [f for f in result.findings if f.rule == "NPU806"]
    command = finding.suggestion.split("  (")[0]
    assert command == "torchrun --nproc_per_node=8 train.py --dist-backend hccl --device=npu --log-name cuda_run"
    assert b"--dist-backend hccl --device=npu" in result.new_source
    # with NPU803 off, the suggestion keeps what the file keeps
    only = run(script, Settings(selection=Selection.create(["NPU806", "NPU804"])))
    (finding,) = only.findings
    assert "--dist-backend nccl --device=npu" in finding.suggestion


def test_launch_suggestion_joins_continued_lines():
    """A line continuation between an environment assignment and `python` is not kept
    as `\\ torchrun` (pasted, that escaped space makes ` torchrun` the command)."""
    script = ('PYTHONPATH="$(dirname $0)/..":$PYTHONPATH \\\n'
              "python -m torch.distributed.launch --nproc_per_node=$GPUS \\\n    train.py $CONFIG --launcher pytorch\n")
    result = run(script)
    (finding,) = [f for f in result.findings if f.rule == "NPU806"]
    assert finding.suggestion.split("  (")[0] == (
        'PYTHONPATH="$(dirname $0)/..":$PYTHONPATH torchrun --nproc_per_node=$GPUS train.py $CONFIG --launcher pytorch')


def test_launch_suggestion_keeps_what_precedes_python():
    """Environment assignments and wrappers in front of `python` stay in the suggestion,
    renamed as NPU801 renames them in the file."""
    result = run("CUDA_VISIBLE_DEVICES=0,1 srun -N 2 python3 -m torch.distributed.launch --nproc_per_node 2 main.py\n")
    (finding,) = [f for f in result.findings if f.rule == "NPU806"]
    assert finding.suggestion.split("  (")[0] == (
        "ASCEND_RT_VISIBLE_DEVICES=0,1 srun -N 2 torchrun --nproc_per_node 2 main.py")


def test_launch_suggestion_in_a_readme_keeps_its_placeholders():
    """README placeholders are blanked for the shell parser (bash reads `<x>` as a
    redirection); the suggestion shows them again, not a run of underscores."""
    from npu_migrate.markdown.engine import migrate as migrate_markdown

    readme = ("# Train\n\n```bash\npython -m torch.distributed.launch --nproc_per_node <num-of-gpus> "
              "--master_port 12345 main.py --cfg <config-file> --data-path <imagenet-path>\n```\n")
    result = migrate_markdown("README.md", readme.encode(), Settings())
    (finding,) = [f for f in result.findings if f.rule == "NPU806"]
    assert finding.suggestion.split("  (")[0] == (
        "torchrun --nproc_per_node <num-of-gpus> --master_port 12345 main.py --cfg <config-file> --data-path <imagenet-path>")


def test_option_and_variable_rewrites_carry_their_evidence():
    """--show-fixes / JSON / explain show why a launcher word changed: the option that
    takes it, the variable named for it, or the comparison with one."""
    script = ('DIST_BACKEND=nccl\nif [ "$DEVICE" == "cuda" ]; then echo gpu; fi\n'
              "torchrun train.py --dist-backend nccl --device cuda\n")
    reasons = {(f.line, f.rule): f.reason for f in run(script).fixes}
    assert reasons[(1, "NPU803")] == (
        "assigned to `DIST_BACKEND`, a name that holds a backend (or that is passed to an option taking one)")
    assert reasons[(2, "NPU804")] == "the comparison with `DEVICE`, which holds a device"
    assert reasons[(3, "NPU803")] == "the value of the option `--dist-backend`, which takes a backend"
    assert reasons[(3, "NPU804")] == "the value of the option `--device`, which takes a device"


def test_a_pip_install_of_a_torch_no_torch_npu_pairs_with_names_the_nearest_pairs():
    # issue 37: torch-npu 2.3.1.* requires torch 2.3.1, and there is no torch-npu 2.15
    result = run("pip install torch==2.3.0 numpy\npip install torch==2.15.0\npip install torch==2.5.1\n")
    suggestions = [f.suggestion for f in result.findings if f.rule == "NPU808"]
    assert "nearest: `torch==2.3.1` with `torch-npu==2.3.*`" in suggestions[0]
    assert "nearest: `torch==2.14.0` with `torch-npu==2.14.*`" in suggestions[1]
    assert suggestions[2].startswith("add torch-npu==2.5.* to this install")


# -- templates that are not shell at one line ------------------------------------------

def test_placeholder_line_is_left_out_and_the_rest_reported_not_rewritten():
    """A template's placeholder line breaks the command tree-sitter builds around it
    (here lines 2-4); the rest of that command is read without the line: what a rule
    would rewrite there is reported, saying which line is not shell, and only the
    statements outside the broken command are rewritten (line 5)."""
    source = ("#!/bin/bash\n"
              "ROOT=<ROOT_PATH>\n"
              "export CUDA_VISIBLE_DEVICES=0,1\n"
              "echo x &>> log\n"
              "export NCCL_SOCKET_IFNAME=^lo,docker0\n")
    result = run(source)
    assert result.new_source == source.replace("NCCL_SOCKET", "HCCL_SOCKET").encode()
    by_line = {(f.line, f.rule): f for f in result.findings}
    assert set(by_line) == {(2, "NPU800"), (3, "NPU801")}
    assert "line 2 is not valid shell" in by_line[(3, "NPU801")].message
    assert "ASCEND_RT_VISIBLE_DEVICES" in by_line[(3, "NPU801")].suggestion
    assert run(result.new_source).new_source is None


def test_no_tolerant_reading_inside_a_continued_or_unclosed_command():
    """A placeholder on a `\\`-continued line, or an unclosed quote: no line can be left
    out without changing what the others mean, so the command is reported once at its
    start and left unread, as before."""
    continued = "python train.py --backend nccl \\\n    --gpus <IDS> (e.g., 0,1) \\\n    --lr 1\n"
    unclosed = 'ARGS="--lr 1\nexport CUDA_VISIBLE_DEVICES=0\npython train.py --backend nccl\n'
    for source in (continued, unclosed):
        result = run(source)
        assert result.new_source is None
        assert [(f.line, f.rule) for f in result.findings] == [(1, "NPU800")]


@pytest.mark.timeout(60)
def test_untagged_readme_fences_of_commands_are_read_as_shell():
    """LLaVA's README installs flash-attn in a fence with no language: a block whose every
    line is a command is read; an untagged block of Python or of output is not."""
    from npu_migrate.markdown.engine import migrate as migrate_markdown

    readme = ("# Install\n\n```\npip install -e \".[train]\"\npip install flash-attn --no-build-isolation\n```\n\n"
              "```\nimport torch\nx = torch.ones(1).cuda()\n```\n\n```\nCUDA_VISIBLE_DEVICES=0 python train.py\n"
              "Epoch 1: loss 0.3 on CUDA_VISIBLE_DEVICES=0\n```\n")
    result = migrate_markdown("README.md", readme.encode(), Settings())
    assert [(f.line, f.rule) for f in result.findings] == [(5, "NPU808")]


# -- NCCL_SOCKET_IFNAME: renamed only with a portable value -----------------------------

@pytest.mark.parametrize(("value", "portable"), [
    ("^lo,docker0", True), ('"^docker"', True), ("$IFNAME", True), ('"${IFNAME:-eth0}"', True),
    ("$(ip -o route | awk '{print $5}')", True), ("", True), ("{{ .Values.ifname }}", True),
    ("eth0", False), ("ib", False), ('"bond0,eth1"', False), ("=enp0s12", False), ("'ibp'", False),
])
def test_interface_value_portability(value, portable):
    from npu_migrate.tables.env_vars import portable_ifname
    assert portable_ifname(value) is portable


def test_interface_values_in_python_source_are_literals_only_when_quoted():
    from npu_migrate.tables.env_vars import ifname_literals
    assert ifname_literals('os.environ["NCCL_SOCKET_IFNAME"] = ifname', python=True) == ()
    assert ifname_literals('os.environ["NCCL_SOCKET_IFNAME"] = "eth0"', python=True) == ('"eth0"',)
    # open-instruct's Beaker launcher (mason.py): a dict per variable
    assert ifname_literals('{"name": "NCCL_SOCKET_IFNAME", "value": "ib"}', python=True) == ('"ib"',)
    assert ifname_literals("- name: NCCL_SOCKET_IFNAME\n  value: bond0\n") == ("bond0",)
    assert ifname_literals("- name: NCCL_SOCKET_IFNAME\n  valueFrom: {}\n") == ()


@pytest.mark.parametrize("value", ["eth0", "ib", "bond0,eth1", '"=enp0s12"'])
def test_a_literal_interface_leaves_every_mention_in_the_script(value):
    source = f"export NCCL_SOCKET_IFNAME={value}\necho $NCCL_SOCKET_IFNAME\nexport NCCL_DEBUG=INFO\n"
    result = run(source)
    assert result.new_source is None
    lines = sorted(f.line for f in result.findings if "network interfaces" in f.message)
    assert lines == [1, 2]
    assert all("^lo,docker0" in f.suggestion for f in result.findings if "network interfaces" in f.message)


def test_an_interface_from_the_environment_is_renamed():
    source = 'export NCCL_SOCKET_IFNAME="${IFNAME}"\necho $NCCL_SOCKET_IFNAME\n'
    assert run(source).new_source == source.replace("NCCL_", "HCCL_").encode()


# -- launch prefixes (issue 36: `uv run coverage run -m torch.distributed.run`) -------------

_LAUNCH_TAIL = "--nproc_per_node 8 pretrain_gpt.py --tf32 True --device cuda --backend nccl --optim adamw_bnb_8bit"


def _rules_and_messages(result) -> list[tuple[str, str]]:
    return sorted([(f.rule, f.message) for f in result.findings] + [(f.rule, f.message) for f in result.fixes])


@pytest.mark.parametrize("prefix", [
    "python -m torch.distributed.run",
    "uv run torchrun",
    "uv run --extra mcore torchrun",
    "coverage run -m torch.distributed.run",
    "coverage run --data-file=/tmp/cov --source nemo_rl -p -m torch.distributed.run",
    "uv run coverage run -m torch.distributed.run",
    "uv run --isolated coverage run --rcfile .coveragerc -m torch.distributed.run",
])
def test_launch_prefixes_get_what_a_plain_torchrun_line_gets(tmp_path, prefix):
    """NeMo-RL's functional tests launch `uv run coverage run ... run_grpo.py` and
    `uv run coverage run -m torch.distributed.run ...`: coverage.py runs a script or
    `-m` module as python would, so those lines are launches (the held-out audit of
    2026-11-30 found them silent)."""
    from dataclasses import replace

    from npu_migrate.pipeline.facts import ProjectFacts

    script = tmp_path / "pretrain_gpt.py"
    script.write_text("import torch\n")
    settings = replace(ALL, facts=ProjectFacts.scan([(str(script), script.read_bytes())]))
    plain = run(f"torchrun {_LAUNCH_TAIL}\n", settings)
    other = run(f"{prefix} {_LAUNCH_TAIL}\n", settings)
    assert _rules_and_messages(plain), "the plain torchrun line has findings and fixes to compare with"
    assert _rules_and_messages(other) == _rules_and_messages(plain)


def test_coverage_commands_that_run_no_python_are_not_launches():
    from npu_migrate.shell import syntax
    from npu_migrate.shell.parser import parse

    def launch(line: str):
        command = parse(line.encode()).root_node.children[0]
        found = syntax.launch_args(command)
        return found and (found[0], [w.text for w in found[1]])

    assert launch("coverage report -m\n") is None
    assert launch("coverage run --source x\n") is None
    assert launch("coverage run --omit '*/t/*' -a train.py --lr 1\n") == ("python", ["train.py", "--lr", "1"])


# -- options kept in a variable (issue 36: `GPT_ARGS="..."` then `torchrun ... $GPT_ARGS`) ----

_OPTIONS = ("--use-flash-attn --swiglu --normalization RMSNorm --transformer-impl transformer_engine "
            "--fp8-format hybrid --fp16 --tf32 True --device cuda --backend nccl --attn_implementation "
            "flash_attention_2 --optim adamw_bnb_8bit")


@pytest.mark.parametrize("script", ["pretrain_gpt.py", "train.py"])
@pytest.mark.parametrize("form", ["string", "array"])
def test_options_in_a_variable_get_what_they_get_on_the_launch_line(tmp_path, script, form):
    """What a rule says of an option on the torchrun line it says of the same option in a
    variable the line expands: `--tf32 True` passed to Megatron's pretrain_gpt.py (which
    names no TrainingArguments) was reported on the line but removed from `GPT_ARGS`."""
    from dataclasses import replace

    from npu_migrate.pipeline.facts import ProjectFacts

    megatron = tmp_path / "pretrain_gpt.py"
    megatron.write_text("import torch\n")
    hf = tmp_path / "train.py"
    hf.write_text("from transformers import TrainingArguments\n")
    settings = replace(ALL, facts=ProjectFacts.scan([(str(f), f.read_bytes()) for f in (megatron, hf)]))
    inline = run(f"torchrun --nproc_per_node 8 {script} {_OPTIONS}\n", settings)
    if form == "string":
        kept = f'GPT_ARGS="{_OPTIONS}"\ntorchrun --nproc_per_node 8 {script} $GPT_ARGS\n'
    else:
        kept = f'GPT_ARGS=({_OPTIONS})\ntorchrun --nproc_per_node 8 {script} "${{GPT_ARGS[@]}}"\n'
    variable = run(kept, settings)
    assert _rules_and_messages(variable) == _rules_and_messages(inline)
    assert {f.line for f in variable.findings} == {1}  # at the assignment, not the launch line
