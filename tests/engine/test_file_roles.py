"""CI files are reported, not rewritten; data files (results, metrics, datasets) are
skipped with one summary line; JSON is read in Python's dialect (NaN, Infinity)."""

from __future__ import annotations

import json
import textwrap

import pytest

from npu_migrate.configs import json_reader
from npu_migrate.pipeline.file_roles import data_file_reason, is_ci_file

from ._files import write

WORKFLOW = textwrap.dedent("""\
    jobs:
      test:
        strategy:
          matrix:
            device: ["cpu", "cuda"]
        env:
          CUDA_VISIBLE_DEVICES: "0"
          PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True
        steps:
          - if: matrix.device == 'cuda'
            run: python train.py
    """)


@pytest.mark.parametrize("rel", [
    ".github/workflows/ci.yml", ".gitlab-ci.yml", ".circleci/config.yml", "Jenkinsfile",
    "azure-pipelines.yml", ".buildkite/pipeline.yml", "sub/.github/workflows/gpu.yaml", ".travis.yml",
])
def test_ci_paths(rel):
    assert is_ci_file(rel)


@pytest.mark.parametrize("rel", ["configs/train.yaml", "github/workflows.yml", "ci.py", "scripts/run.sh"])
def test_not_ci_paths(rel):
    assert not is_ci_file(rel)


@pytest.mark.parametrize("rel", [".github/workflows/ci.yml", ".gitlab-ci.yml", "azure-pipelines.yml"])
def test_ci_file_is_reported_not_rewritten(tmp_path, run_cli, rel):
    path = write(tmp_path, rel, WORKFLOW)
    run_cli(".", "--report", str(tmp_path.parent / "report.json"))
    report = json.loads((tmp_path.parent / "report.json").read_text())
    assert path.read_text() == WORKFLOW
    assert report["summary"]["files_changed"] == 0 and report["summary"]["fixes"] == 0
    rules = sorted(f["rule"] for file in report["files"] for f in file["findings"])
    assert rules == ["NPU830", "NPU833", "NPU833"]  # the matrix value and both env renames
    assert all("CI file, left unchanged" in f["message"] for file in report["files"] for f in file["findings"])
    run_cli(".", "--write")
    assert path.read_text() == WORKFLOW


def test_json_reads_python_dialect():
    data = b'{"loss": NaN, "best": -Infinity, "worst": Infinity, "note": "NaN", "device": "cuda"}'
    document = json_reader.read(data)
    assert [(s.value, s.keys) for s in document.scalars if not s.is_key] == [("NaN", ("note",)), ("cuda", ("device",))]
    cuda = next(s for s in document.scalars if s.value == "cuda")
    assert data[cuda.start:cuda.end] == b'"cuda"'  # offsets are the file's


def test_json_with_nan_config_is_migrated_not_an_error(tmp_path, run_cli):
    path = write(tmp_path, "train_config.json", '{"device": "cuda", "lr_floor": NaN}\n')
    result = run_cli(".", "--check")
    assert result.exit_code == 1 and "failed" in result.output and "0 failed" in result.output
    run_cli(".", "--write")
    assert path.read_text() == '{"device": "npu", "lr_floor": NaN}\n'


def test_invalid_json_is_still_an_error(tmp_path, run_cli):
    write(tmp_path, "train_config.json", '{"device": "cuda", "x": Nan}\n')
    result = run_cli(".")
    assert result.exit_code == 2 and "train_config.json:1: not valid JSON" in result.output


@pytest.mark.parametrize("rel,data", [
    ("results/llama.json", '{"device": "cuda", "loss": NaN}'),
    ("benchmarks/out/a.json", '{"device": "cuda"}'),
    ("run_results.json", '{"device": "cuda"}'),
    ("eval_metrics.yaml", "device: cuda\n"),
    ("eval_results.yml", "device: cuda\n"),
    ("eval.json", '{"device": "cuda"}'),  # JSON named for an eval: its output
    ("anything.json", '[{"device": "cuda"}, {"device": "cuda"}]'),
    ("train.jsonl", '{"device": "cuda"}\n'),
])
def test_data_files(rel, data):
    assert data_file_reason(rel, data.encode()) is not None


@pytest.mark.parametrize("rel,data", [
    ("configs/train.yaml", "device: cuda\n"),
    ("benchmarks/llama.yaml", "device: cuda\n"),  # a recipe in a benchmarks folder
    ("beaker/default_eval.yaml", "gpuCount: 1\n"),  # an eval's spec: a task, not an output
    ("configs/eval.yaml", "device: cuda\n"),
    ("bench.yml", "device: cuda\n"),
    ("results/ds_config.json", '{"device": "cuda"}'),  # says it is configuration
    ("eval_config.json", '{"device": "cuda"}'),
    ("config.json", '{"_attn_implementation": "flash_attention_2"}'),
])
def test_not_data_files(rel, data):
    assert data_file_reason(rel, data.encode()) is None


def test_data_files_are_skipped_with_one_summary_line(tmp_path, run_cli):
    records = json.dumps([{"device": "cuda", "loss": 1.0}] * 50).replace("1.0", "NaN")
    for i in range(5):
        write(tmp_path, f"results/run{i}.json", records)
    write(tmp_path, "configs/train.yaml", "device: cuda\n")
    result = run_cli(".")
    assert result.exit_code == 0
    assert "5 data file(s) skipped" in result.output
    assert "results/" not in result.output.replace("results, metrics", "")
    assert "+device: npu" in result.output
    run_cli(".", "--report", str(tmp_path.parent / "report.json"))
    report = json.loads((tmp_path.parent / "report.json").read_text())
    assert report["summary"]["files_skipped_data"] == 5


# -- a CUDA module beside the project's own Ascend one ---------------------------------

ENGINE = 'import torch\n\n__all__ = ["send"]\n\n\ndef send(x):\n    torch.cuda.synchronize()\n    return x.to("cuda")\n'


@pytest.mark.parametrize("name,sibling", [
    ("nccl_checkpoint_engine.py", "hccl_checkpoint_engine.py"),  # verl's checkpoint engines
    ("cuda_ops.py", "npu_ops.py"),
    ("ops_gpu.py", "ops_ascend.py"),
])
def test_a_cuda_module_beside_its_ascend_sibling_is_left_alone(tmp_path, run_cli, name, sibling):
    write(tmp_path, f"pkg/{name}", ENGINE)
    write(tmp_path, f"pkg/{sibling}", "import torch_npu\n")
    result = run_cli("--write", "--no-cache", ".")
    assert (tmp_path / "pkg" / name).read_text() == ENGINE
    assert f"NPU010 this module is CUDA's implementation beside the project's own Ascend one (`{sibling}`)" in (
        result.output)


@pytest.mark.parametrize("name,other", [
    ("nccl_checkpoint_engine.py", "gloo_checkpoint_engine.py"),  # no Ascend sibling
    ("cuda_ops.py", "sub/npu_ops.py"),  # not beside it
    ("nccl_utils.py", "hccl_utils.txt"),  # not a module
])
def test_a_cuda_module_without_an_ascend_sibling_is_migrated(tmp_path, run_cli, name, other):
    write(tmp_path, f"pkg/{name}", ENGINE)
    write(tmp_path, f"pkg/{other}", "x = 1\n")
    run_cli("--write", "--no-cache", ".")
    assert 'x.to("npu")' in (tmp_path / "pkg" / name).read_text()


LAUNCHER = "CUDA_VISIBLE_DEVICES=0,1 NCCL_IB_HCA=mlx5_0 torchrun --nproc_per_node 2 train.py\n"


@pytest.mark.parametrize("name,sibling,twin", [
    ("scripts/gpu/sample.sh", "scripts/npu/sample.sh", "npu/"),  # Open-Sora-Plan's launchers
    ("scripts/gpu/t2v/sample.sh", "scripts/npu/t2v/other.sh", "npu/"),  # a folder above
    ("launch/train_gpu.sh", "launch/train_npu.sh", "train_npu.sh"),
    ("docker/Dockerfile.cuda", "docker/Dockerfile.npu", "Dockerfile.npu"),
])
def test_a_launcher_beside_its_ascend_twin_is_left_alone(tmp_path, run_cli, name, sibling, twin):
    """Held-out round 15: the project's GPU launchers lost their CUDA device mask although it
    keeps Ascend ones beside them. They are CUDA's; nothing in them is rewritten or reported
    but one NPU010 line."""
    write(tmp_path, "pyproject.toml", "[project]\nname = 'p'\n")
    write(tmp_path, name, LAUNCHER if name.endswith(".sh") else "FROM nvcr.io/nvidia/pytorch:24.01-py3\n")
    write(tmp_path, sibling, "ASCEND_RT_VISIBLE_DEVICES=0,1 torchrun train.py\n")
    result = run_cli("--write", "--no-cache", name)
    assert (tmp_path / name).read_text().startswith(("CUDA_VISIBLE_DEVICES", "FROM nvcr.io"))
    assert f"NPU010 this file is CUDA's beside the project's own Ascend one (`{twin}`); left unchanged" in result.output
    assert "NPU802" not in result.output and "NPU821" not in result.output
    assert result.exit_code == 0, result.output


def test_a_gpu_folder_above_the_project_root_is_no_twin(tmp_path, run_cli):
    """A checkout under ``/home/gpu/`` beside ``/home/npu/`` is not the CUDA twin of anything."""
    write(tmp_path, "npu/readme.txt", "x\n")
    write(tmp_path, "gpu/proj/pyproject.toml", "[project]\nname = 'p'\n")
    write(tmp_path, "gpu/proj/run.sh", LAUNCHER)
    run_cli("--write", "--no-cache", "gpu/proj")
    assert (tmp_path / "gpu/proj/run.sh").read_text().startswith("ASCEND_RT_VISIBLE_DEVICES")


def test_the_cache_sees_an_ascend_sibling_appear(tmp_path, run_cli):
    cache = ("--cache-dir", str(tmp_path.parent / "cache"))
    write(tmp_path, "pkg/nccl_engine.py", ENGINE)
    assert "1 would change" in run_cli(*cache, ".").output
    assert "1 would change" in run_cli(*cache, ".").output  # from the cache
    write(tmp_path, "pkg/hccl_engine.py", "import torch_npu\n")
    assert "0 would change" in run_cli(*cache, ".").output


def test_a_method_named_init_process_group_does_not_make_a_file_train():
    from npu_migrate.pipeline.facts import TRAINS

    assert TRAINS.search(b"class Engine:\n    def init_process_group(self, rank):\n        pass\n") is None
    assert TRAINS.search(b"dist.init_process_group(backend='nccl')\n") is not None


@pytest.mark.parametrize("folder", ["library/ipex", "backends/xpu", "ops/mps", "compat/zluda"])
def test_another_accelerators_folder_is_left_alone(tmp_path, run_cli, folder):
    """sd-scripts' library/ipex/ maps torch.cuda onto torch.xpu; its CUDA names are
    Intel's shims, not code to migrate (NPU010). Folders are read from the project root."""
    write(tmp_path, "pyproject.toml", "[project]\nname = 'p'\n")
    write(tmp_path, f"{folder}/hijacks.py", ENGINE)
    result = run_cli("--write", "--no-cache", ".")
    assert (tmp_path / folder / "hijacks.py").read_text() == ENGINE
    assert "NPU010 this module is another accelerator's support code" in result.output


def test_a_folder_only_containing_a_backend_word_is_migrated(tmp_path, run_cli):
    write(tmp_path, "pyproject.toml", "[project]\nname = 'p'\n")
    write(tmp_path, "xpu_free/ops.py", ENGINE)
    run_cli("--write", "--no-cache", ".")
    assert 'x.to("npu")' in (tmp_path / "xpu_free/ops.py").read_text()
