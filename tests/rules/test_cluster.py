"""The cluster-stack rules (rules/cluster, NPU950-NPU967) and shell heredocs beyond
their golden fixtures: what only shows across statements or files, positions,
and mixes with unrelated input."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source as migrate_python
from npu_migrate.shell.engine import migrate as migrate_shell

from ._run import run

ALL = Settings(selection=Selection.create(["ALL"]))
ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "rules"


def _messages(result) -> Counter:
    return Counter((f.rule, f.message) for f in result.findings)


# -- Ray ---------------------------------------------------------------------------------


def test_options_on_a_remote_function_defined_after_its_use_is_rewritten():
    source = (
        "import ray\n\n\ndef launch():\n    return Worker.options(num_gpus=1).remote()\n\n\n"
        "@ray.remote\nclass Worker:\n    pass\n"
    )
    out, findings = run(source, "NPU950")
    assert 'Worker.options(resources={"NPU": 1}).remote()' in out
    assert findings == []


def test_options_on_a_name_bound_twice_is_reported_not_rewritten():
    source = (
        "import ray\n\n@ray.remote\nclass Worker:\n    pass\n\n"
        "if fast:\n    Worker = FastWorker\nWorker.options(num_gpus=1).remote()\n"
    )
    out, findings = run(source, "NPU950")
    assert out == source
    assert [f.rule for f in findings] == ["NPU950"]
    assert 'resources={"NPU": 1}' in findings[0].suggestion


def test_ray_rewrites_follow_the_files_quotes():
    out, _ = run("import ray\n\n@ray.remote(num_gpus=1)\ndef f():\n    return 'x'\n", "NPU950")
    assert "@ray.remote(resources={'NPU': 1})" in out


def test_get_gpu_ids_through_an_alias_keeps_the_alias():
    out, findings = run("import ray as r\n\nn = len(r.get_gpu_ids())\n", "NPU952")
    assert out == 'import ray as r\n\nn = len(r.get_runtime_context().get_accelerator_ids()["NPU"])\n'
    assert findings == []


def test_get_gpu_ids_imported_by_name_is_reported_with_the_replacement():
    source = "from ray import get_gpu_ids\n\nn = len(get_gpu_ids())\n"
    out, findings = run(source, "NPU952")
    assert out == source  # no module name to write the runtime context through
    assert [f.rule for f in findings] == ["NPU952"]
    assert 'get_accelerator_ids()["NPU"]' in findings[0].suggestion


def test_a_bundle_list_read_elsewhere_is_reported_not_rewritten():
    source = (
        "from ray.util.placement_group import placement_group\n\n\ndef make(n):\n"
        '    bundles = [{"GPU": 1}] * n\n    pg = placement_group(bundles)\n    return pg, bundles\n'
    )
    out, findings = run(source, "NPU951")
    assert out == source
    assert [f.rule for f in findings] == ["NPU951"]


# -- CUDA-only libraries ------------------------------------------------------------------


def test_a_projects_own_rotary_emb_module_is_not_reported(tmp_path):
    own = tmp_path / "rotary_emb.py"
    own.write_text("def apply(x):\n    return x\n")
    model = tmp_path / "model.py"
    model.write_text("import rotary_emb\nimport xentropy_cuda_lib\n")
    facts = ProjectFacts.scan([(str(own), own.read_bytes()), (str(model), model.read_bytes())])
    result = migrate_python(str(model), model.read_bytes(), Settings(selection=Selection.create(["NPU958"]), facts=facts))
    assert [(f.line, f.rule) for f in result.findings] == [(2, "NPU958")]
    assert "torch_npu.npu_cross_entropy_loss" in result.findings[0].suggestion


def test_the_adaptor_goes_before_a_project_module_imported_ahead_of_megatron(tmp_path):
    """Megatron-Bridge's scripts/training/run_recipe.py imports its sibling recipe_runner
    (which imports megatron.bridge) before its own first megatron import: the adaptor
    must come before that import, or megatron is imported before MindSpeed patches it."""
    runner = tmp_path / "recipe_runner.py"
    runner.write_text("from megatron.bridge.training.config import ConfigContainer\n")
    script = tmp_path / "run_recipe.py"
    script.write_text("from __future__ import annotations\n\nimport argparse\n\nfrom recipe_runner import run_config\n"
                      "from megatron.bridge.recipes.utils import presets\n\nif __name__ == \"__main__\":\n"
                      "    run_config(presets)\n")
    facts = ProjectFacts.scan([(str(runner), runner.read_bytes()), (str(script), script.read_bytes())])
    settings = Settings(selection=Selection.create(["NPU966"]), facts=facts)
    result = migrate_python(str(script), script.read_bytes(), settings)
    assert result.new_source.decode() == ("from __future__ import annotations\n\nimport argparse\n"
                                          "import mindspeed.megatron_adaptor\n\nfrom recipe_runner import run_config\n"
                                          "from megatron.bridge.recipes.utils import presets\n\n"
                                          "if __name__ == \"__main__\":\n    run_config(presets)\n")
    # with torch imported first, the line stays right after `import torch`, as MindSpeed's README says
    script.write_text("import torch\nfrom recipe_runner import run_config\nimport megatron\n\n"
                      "if __name__ == \"__main__\":\n    run_config(torch)\n")
    result = migrate_python(str(script), script.read_bytes(), settings)
    assert result.new_source.decode().startswith("import torch\nimport mindspeed.megatron_adaptor\nfrom recipe_runner")


# -- shell heredocs -------------------------------------------------------------------------

HEREDOC = (
    "#!/bin/bash\n"
    "for node in 0 1; do\n"
    "  cat > job_$node.sh <<'EOF'\n"
    "#!/bin/bash\n"
    "torchrun --nproc_per_node 8 train.py --backend nccl\n"
    "EOF\n"
    "done\n"
)


EVAL_LAUNCHER = (
    "#!/bin/bash\n"
    'if [ "$PR" = fp8 ]; then\n'
    '    pr_options=" \\\n'
    "        --bf16 \\\n"
    '        --fp8-format hybrid"\n'
    "fi\n"
    'megatron_options=" \\\n'
    "        --num-layers ${NUM_LAYERS} \\\n"
    "        --swiglu \\\n"
    "        --normalization RMSNorm \\\n"
    "        --position-embedding-type rope \\\n"
    "        --transformer-impl transformer_engine \\\n"
    '        "\n'
    'run_cmd="torchrun $DISTRIBUTED_ARGS pretrain_qwen.py\n'
    ' ${megatron_options} ${pr_options}"\n'
    "eval ${run_cmd}\n"
)


def test_a_megatron_launch_kept_in_a_string_is_reported_at_each_options_own_line():
    result = migrate_shell("run_mcore.sh", EVAL_LAUNCHER.encode(), Settings(selection=Selection.create(["NPU967"])))
    assert result.new_source is None
    lines = EVAL_LAUNCHER.splitlines()
    at = {(f.line, f.col) for f in result.findings}
    wanted = ("--fp8-format", "--swiglu", "--normalization", "--position-embedding-type", "--transformer-impl")
    assert at == {(n, lines[n - 1].index(o)) for o in wanted for n in range(1, len(lines) + 1)
                  if lines[n - 1].lstrip().startswith(o)}


def test_a_string_that_launches_another_script_is_not_megatron():
    data = EVAL_LAUNCHER.replace("pretrain_qwen.py", "train_qwen.py")
    assert migrate_shell("run.sh", data.encode(), Settings(selection=Selection.create(["NPU967"]))).findings == []
    data = EVAL_LAUNCHER.replace("torchrun $DISTRIBUTED_ARGS pretrain_qwen.py", "see pretrain_qwen.py for $X")
    assert migrate_shell("run.sh", data.encode(), Settings(selection=Selection.create(["NPU967"]))).findings == []


def test_a_heredoc_script_is_rewritten_at_its_own_line_and_column():
    result = migrate_shell("write_jobs.sh", HEREDOC.encode(), Settings(selection=Selection.create(["NPU803"])))
    assert result.new_source == HEREDOC.replace("--backend nccl", "--backend hccl").encode()
    (fix,) = result.fixes
    assert (fix.line, fix.col) == (5, HEREDOC.splitlines()[4].index("nccl"))  # col is 0-based


def test_a_heredoc_the_shell_expands_is_reported_not_rewritten():
    data = "cat > job.sh <<EOF\ntorchrun --nnodes $NNODES train.py --backend nccl\nEOF\n"
    result = migrate_shell("write_jobs.sh", data.encode(), Settings(selection=Selection.create(["NPU803"])))
    assert result.new_source is None
    (finding,) = result.findings
    assert finding.rule == "NPU803" and finding.line == 2 and "heredoc" in finding.message


def test_heredocs_that_are_not_shell_scripts_are_left_alone():
    data = (
        "cat > config.yaml <<'EOF'\nbackend: nccl\nEOF\n"
        "python - <<'EOF'\nimport torch\ntorch.distributed.init_process_group('nccl')\nEOF\n"
        "cat <<'EOF'\nUsage: torchrun train.py --backend nccl\nEOF\n"
    )
    result = migrate_shell("setup.sh", data.encode(), Settings(selection=Selection.create(["NPU803"])))
    assert result.new_source is None and result.findings == []


SHELL = sorted(p for d in ("NPU955", "NPU965", "NPU967", "NPU803") for p in (ROOT / d).glob("*.sh")
               if ".after." not in p.name)
neutral = st.sampled_from([
    "export OUT=/data/run1", 'echo "ray start --num-gpus 8"', "mkdir -p \"$OUT\"", "ray status",
    "python train.py --lr 1e-4", "ray start --head --num-cpus 4", "cat <<'EOF'\nhello\nEOF",
])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SHELL), min_size=1, max_size=3, unique=True), st.lists(neutral, max_size=5),
       st.randoms(use_true_random=False))
def test_cluster_shell_mixes_keep_unrelated_lines_converge_and_report_the_same(fixtures, extra, random):
    blocks = [p.read_bytes() for p in fixtures] + [(s + "\n").encode() for s in extra]
    random.shuffle(blocks)
    data = b"".join(b if b.endswith(b"\n") else b + b"\n" for b in blocks)
    first = migrate_shell("run.sh", data, ALL)
    assert first.error is None
    output = first.new_source if first.new_source is not None else data
    for line in extra:
        assert (line + "\n").encode() in output
    second = migrate_shell("run.sh", output, ALL)
    assert second.new_source is None, "a second run changed the script again"
    assert _messages(second) == _messages(first)


def test_mindspeed_adaptor_is_not_added_where_megatron_is_the_projects_own_fork(tmp_path, run_cli):
    """gpt-neox ships its own `megatron/` package (no Megatron-LM `megatron/core`): MindSpeed's
    adaptor patches Megatron-LM only, so its entry scripts get a finding, not the import. A
    project with Megatron-LM's layout keeps getting the import."""
    script = "import torch\nfrom megatron.training import pretrain\n\nif __name__ == '__main__':\n    pretrain()\n"
    for name, core in (("neox", False), ("lm", True)):
        project = tmp_path / name
        (project / "megatron").mkdir(parents=True)
        (project / "megatron" / "__init__.py").write_text("")
        if core:
            (project / "megatron" / "core").mkdir()
            (project / "megatron" / "core" / "__init__.py").write_text("")
        (project / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
        (project / "tools").mkdir()
        (project / "tools" / "train.py").write_text(script)
        result = run_cli(str(project / "tools" / "train.py"), "--no-cache", "--select", "NPU966")
        if core:
            assert "+import mindspeed.megatron_adaptor" in result.output
        else:
            assert "+import mindspeed.megatron_adaptor" not in result.output
            assert "this project's own package (megatron/" in result.output


def test_lightning_gpus_in_a_hydra_trainer_group_file():
    """safari (held-out round 5): `configs/trainer/lm.yaml` holds `gpus: 8` and nothing that
    says Hydra or Lightning but its directory, a Hydra config group named `trainer`. NPU970
    reports it there and only there; NPU834, also selected, leaves the line to it."""
    from npu_migrate.configs.engine import migrate as migrate_config

    data = b"accumulate_grad_batches: 1\ngpus: 8\naccelerator: gpu\nmax_epochs: 50\n"
    settings = Settings(selection=Selection.create(["NPU970", "NPU834"]))
    group = migrate_config("configs/trainer/lm.yaml", data, settings)
    assert result_lines(group) == [(2, "NPU970"), (3, "NPU970")]
    other = migrate_config("configs/model/lm.yaml", data, settings)
    assert result_lines(other) == [(3, "NPU834")]


def result_lines(result) -> list[tuple[int, str]]:
    assert result.error is None and result.new_source is None
    return sorted((f.line, f.rule) for f in result.findings)
