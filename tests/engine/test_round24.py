"""Held-out round 24's wrong edits, one family per test (TencentPretrain's `torch` bound by a
star import; wenet's Triton server helpers, its recipes' nvidia-smi device lists, its ONNX
recognizers and its `--device` option that already offers the NPU; diffusion-pipe's copy of
torch's CUDA IPC reductions; align-anything's Ray vLLM engines and its package's optional
runtime). Each test fails on the engine of round 24's first pass (a06df1d); the others are
negative controls."""

from __future__ import annotations

import sys

import pytest

from ._files import write

STAR_SCRIPT = '''import torch.nn as nn
from pkg.common import *


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return nn.Linear(2, 2).to(device)


if __name__ == "__main__":
    main()
'''


def test_torch_bound_by_a_star_import_is_migrated_whole(tmp_path, run_cli):
    """TencentPretrain's finetune scripts read `torch` through `from finetune.run_classifier
    import *`: the "cuda" was rewritten and `torch.cuda.is_available()` left, so the choice
    read `"npu" if torch.cuda.is_available()` (CPU on Ascend, an unknown device on CUDA),
    and the next run rewrote the rest."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/common.py", "import torch\n")
    path = write(tmp_path, "run.py", STAR_SCRIPT)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'torch.device("npu" if torch.npu.is_available() else "cpu")' in text
    assert "torch.cuda.is_available()" not in text
    second = run_cli("--check", "--no-cache", ".")
    assert second.exit_code == 0, second.output


def test_a_module_that_binds_torch_itself_is_not_given_the_star_import(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/common.py", "import torch\n")
    source = STAR_SCRIPT.replace("def main():", "def main(torch=None):")
    path = write(tmp_path, "run.py", source)
    run_cli("--write", "--no-cache", ".")
    assert "torch.cuda.is_available()" in path.read_text()


TRITON_MODEL = '''import triton_python_backend_utils as pb_utils
import torch
from frame_reducer import FrameReducer


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([])]
'''
FRAME_REDUCER = '''import torch


class FrameReducer(torch.nn.Module):
    pass


if __name__ == "__main__":
    device = "cuda:0"
    x = torch.ones(2, device=device)
    torch.cuda.synchronize()
'''


def test_a_helper_beside_a_triton_server_model_is_left(tmp_path, run_cli):
    """wenet's CUDA decoders: `frame_reducer.py` sits in a Triton Python-backend model's
    version folder (its `model.py` imports triton_python_backend_utils): that server has no
    Ascend release, and its self-benchmark's `device = "cuda:0"` had become "npu:0"."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "model_repo/scoring/config.pbtxt", 'backend: "python"\n')
    write(tmp_path, "model_repo/scoring/1/model.py", TRITON_MODEL)
    path = write(tmp_path, "model_repo/scoring/1/frame_reducer.py", FRAME_REDUCER)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == FRAME_REDUCER
    assert "NVIDIA Triton Inference Server model" in result.output


def test_the_same_helper_elsewhere_is_migrated(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "model_repo/scoring/1/model.py", "import torch\n")
    path = write(tmp_path, "model_repo/scoring/1/frame_reducer.py", FRAME_REDUCER)
    run_cli("--write", "--no-cache", ".")
    assert 'device = "npu:0"' in path.read_text()


REDUCTION = '''import torch


def reduce_storage(tensor):
    storage = tensor._typed_storage()
    if storage._untyped_storage.device.type == "cuda":
        handle = storage._share_cuda_()
        return handle
    return storage.cpu()
'''


def test_a_test_in_front_of_torch_cuda_ipc_internals_is_kept(tmp_path, run_cli):
    """diffusion-pipe's copy of torch.multiprocessing.reductions: the device test in front of
    `storage._share_cuda_()` had become `== "npu"`, sending NPU storages into CUDA IPC."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "utils/reduction.py", REDUCTION)
    result = run_cli("--write", "--no-cache", ".")
    assert 'device.type == "cuda"' in path.read_text()
    assert "guards `storage._share_cuda_`" in result.output


RAY_ENGINES = '''import os

import ray
from ray.util.placement_group import placement_group


@ray.remote
class LLMRayActor:
    def __init__(self, noset):
        if noset:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(ray.get_gpu_ids()[0])


def create_engines(num_engines, tensor_parallel_size, hybrid):
    num_gpus = int(tensor_parallel_size == 1)
    if hybrid:
        num_gpus = 0.2
    bundles = [{"GPU": 1, "CPU": 1} for _ in range(num_engines)]
    pg = placement_group(bundles, strategy="PACK")
    return [LLMRayActor.options(num_cpus=num_gpus, num_gpus=num_gpus, placement_group=pg).remote(True)
            for _ in range(num_engines)]
'''


def test_ray_names_beside_a_computed_gpu_request_are_left(tmp_path, run_cli):
    """align-anything's vLLM engines: `.options(num_gpus=num_gpus)` is computed and left
    (NPU950), but the bundles became `{"NPU": 1}` (never placeable beside the GPU request),
    `ray.get_gpu_ids()` the NPU ids and `CUDA_VISIBLE_DEVICES` Ascend's variable."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "engines.py", RAY_ENGINES)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert '{"GPU": 1, "CPU": 1}' in text
    assert "ray.get_gpu_ids()[0]" in text
    assert 'os.environ["CUDA_VISIBLE_DEVICES"]' in text
    assert "the bundles must name the same resource" in result.output


def test_ray_names_beside_a_literal_gpu_request_are_rewritten(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    source = RAY_ENGINES.replace("num_cpus=num_gpus, num_gpus=num_gpus", "num_cpus=1, num_gpus=1")
    path = write(tmp_path, "engines.py", source)
    run_cli("--write", "--no-cache", ".")
    assert '{"NPU": 1, "CPU": 1}' in path.read_text()


ONNX_RECOGNIZER = '''import argparse

import onnxruntime as rt
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--gpu", type=int, default=-1)
parser.add_argument("--disable_gpu", action="store_true")
args = parser.parse_args()

use_cuda = args.gpu >= 0 and torch.cuda.is_available()
if use_cuda:
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
else:
    providers = ["CPUExecutionProvider"]
session = rt.InferenceSession("model.onnx", providers=providers)

device = "cpu" if args.disable_gpu else "cuda"
x = torch.ones(2).to(device)
binding = session.io_binding()
binding.bind_input(name="x", device_type=device, device_id=0, element_type=float, shape=(2,), buffer_ptr=x.data_ptr())
'''


def test_onnxruntime_providers_and_bindings_keep_cuda(tmp_path, run_cli):
    """wenet's ONNX recognizer and benchmark: a flag picking onnxruntime's CUDA provider had
    become `torch.npu.is_available()`, and the device bound to onnxruntime's IOBinding (and
    also used for the torch tensors) had become "npu", which onnxruntime does not know."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "recognize_onnx.py", ONNX_RECOGNIZER)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "use_cuda = args.gpu >= 0 and torch.cuda.is_available()" in text
    assert 'device = "cpu" if args.disable_gpu else "cuda"' in text
    assert "binds torch tensors to onnxruntime's IOBinding" in result.output


def test_a_device_for_torch_alone_is_still_rewritten(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    source = ONNX_RECOGNIZER.split("binding = ")[0]
    path = write(tmp_path, "recognize_onnx.py", source)
    run_cli("--write", "--no-cache", ".")
    assert 'device = "cpu" if args.disable_gpu else "npu"' in path.read_text()


RECIPE = '''#!/bin/bash
if command -v nvidia-smi &> /dev/null; then
  num_gpus=$(nvidia-smi -L | wc -l)
  gpu_list=$(seq -s, 0 $((num_gpus-1)))
else
  num_gpus=-1
  gpu_list="-1"
fi
export CUDA_VISIBLE_DEVICES="${gpu_list}"
echo "CUDA_VISIBLE_DEVICES is ${CUDA_VISIBLE_DEVICES}"
torchrun --nproc_per_node=$num_gpus train.py
'''


def test_a_visibility_list_read_from_nvidia_smi_is_left(tmp_path, run_cli):
    """wenet's recipes: without nvidia-smi (an Ascend host) the list is "-1", which
    `ASCEND_RT_VISIBLE_DEVICES` reads as "no NPU"; CUDA's variable there was ignored."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "run.sh", RECIPE)
    result = run_cli("--write", "--no-cache", ".")
    assert "export CUDA_VISIBLE_DEVICES=" in path.read_text()
    assert "reads the NVIDIA GPUs of the machine it runs on (`nvidia-smi`, line 3)" in result.output


JOB_SCRIPTS = {
    # oumi's Polaris job (NVIDIA A100 nodes): it logs the machine's GPUs
    "polaris.sh": '#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=3,2,1,0\necho "GPUs: $(nvidia-smi -L)"\ntorchrun train.py\n',
    # oumi's Frontier job (AMD MI250X): ROCm's tool and variables
    "frontier.sh": '#!/bin/bash\necho "ROCM info: `rocm-smi`"\necho "CUDA_VISIBLE_DEVICES: ${CUDA_VISIBLE_DEVICES}"\n'
                   'torchrun train.py\n',
    "hip.sh": '#!/bin/bash\nexport HIP_VISIBLE_DEVICES=0,1\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n'
              'torchrun train.py\n',
}


def test_a_job_script_that_reads_its_machines_gpus_keeps_their_variables(tmp_path, run_cli):
    """oumi's supercomputer job scripts (held-out round 25): a script that asks the machine it
    runs on for its NVIDIA or AMD GPUs is that machine's; renaming its CUDA variables dropped
    the pinning and the allocator setting there and gave Ascend nothing."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    paths = {name: write(tmp_path, name, text) for name, text in JOB_SCRIPTS.items()}
    result = run_cli("--write", "--no-cache", ".")
    assert {name: path.read_text() for name, path in paths.items()} == JOB_SCRIPTS
    assert "polaris.sh:2:" in result.output and "frontier.sh:3:" in result.output and "hip.sh:3:" in result.output
    assert "reads the AMD GPUs of the machine it runs on (ROCm's `HIP_VISIBLE_DEVICES`, line 2)" in result.output


def test_a_script_that_only_runs_nvidia_smi_is_still_migrated(tmp_path, run_cli):
    """A bare `nvidia-smi` log line is a command for the user to port (NPU805), not a sign
    that the script is for NVIDIA machines."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "run.sh", "#!/bin/bash\nnvidia-smi\nexport CUDA_VISIBLE_DEVICES=0,1\ntorchrun train.py\n")
    run_cli("--write", "--no-cache", ".")
    assert "export ASCEND_RT_VISIBLE_DEVICES=0,1" in path.read_text()


def test_a_literal_visibility_list_is_still_renamed(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "run.sh", "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\ntorchrun train.py\n")
    run_cli("--write", "--no-cache", ".")
    assert "export ASCEND_RT_VISIBLE_DEVICES=0,1" in path.read_text()


RECOGNIZE = '''import argparse
import os

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--gpu", type=int, default=-1)
parser.add_argument("--device", type=str, default="cpu", choices=["cpu", "npu", "cuda"])
args = parser.parse_args()
if args.gpu != -1:
    args.device = "cuda"
if "cuda" in args.device:
    os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
model = torch.nn.Linear(2, 2).to(torch.device(args.device))
'''


def test_an_option_that_already_offers_the_npu_keeps_its_cuda_path(tmp_path, run_cli):
    """wenet's recognize.py: `--device` offers "npu"; rewritten, `"npu" in args.device` set
    `ASCEND_RT_VISIBLE_DEVICES=-1` for every `--device npu` run and hid the NPU."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "recognize.py", RECOGNIZE)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'args.device = "cuda"' in text
    assert 'if "cuda" in args.device:' in text
    assert 'os.environ["CUDA_VISIBLE_DEVICES"]' in text
    assert "the `device` option already offers the NPU" in result.output


def test_an_option_without_the_npu_is_migrated(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "recognize.py", RECOGNIZE.replace('["cpu", "npu", "cuda"]', '["cpu", "cuda"]'))
    run_cli("--write", "--no-cache", ".")
    assert 'args.device = "npu"' in path.read_text()


PYPROJECT = '''[project]
name = "aligner"
version = "0.1"
dependencies = [
    "torch",
]

[project.optional-dependencies]
ascend = ["torch-npu"]
'''
TRAINER = '''import torch


def main():
    model = torch.nn.Linear(2, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(1, 2).cuda()).sum().backward()
    optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_package_whose_runtime_imports_are_all_guarded_keeps_its_dependencies(tmp_path, run_cli):
    """align-anything: every `import npu_runtime` NPU701 writes is guarded (the entry points
    run without it), yet `npu-runtime==X` went into the package's `[project] dependencies`,
    so `pip install align-anything` needed an index that serves it."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "pyproject.toml", PYPROJECT)
    write(tmp_path, "aligner/__init__.py", "")
    trainer = write(tmp_path, "aligner/trainers/__init__.py", "")
    trainer = write(tmp_path, "aligner/trainers/sft.py", TRAINER)
    run_cli("--write", "--no-cache", ".")
    assert "npu_runtime.install()" in trainer.read_text()
    assert path.read_text() == PYPROJECT


def test_a_package_that_needs_the_runtime_declares_it(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "pyproject.toml", PYPROJECT)
    write(tmp_path, "aligner/__init__.py", "")
    write(tmp_path, "aligner/trainers/__init__.py", "")
    # (a module that already calls the runtime at its top level needs it installed)
    source = "import npu_runtime\n" + TRAINER.replace("    optimizer = ",
                                                     "    model = npu_runtime.data_parallel(model)\n    optimizer = ")
    write(tmp_path, "aligner/trainers/sft.py", source)
    run_cli("--write", "--no-cache", ".")
    assert "npu-runtime==" in path.read_text()


def test_a_launcher_beside_its_npu_twin_is_left(tmp_path, run_cli):
    """wenet keeps `run_npu.sh` beside each recipe's `run.sh`: `run.sh` is the recipe's NVIDIA
    launcher, whose `nccl` and visibility list had been renamed."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    source = "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\ntorchrun train.py --dist_backend nccl\n"
    path = write(tmp_path, "recipe/run.sh", source)
    write(tmp_path, "recipe/run_npu.sh", "#!/bin/bash\nexport ASCEND_RT_VISIBLE_DEVICES=0,1\ntorchrun train.py\n")
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == source
    assert "beside the project's own Ascend one (`run_npu.sh`)" in result.output


SAVE_THEN_LOAD = '''import torch
from mylib.saver import save_model


def main(args, model):
    for epoch in range(args.epochs):
        if epoch == args.epochs - 1:
            save_model(model, args.output_model_path)
    model.load_state_dict(torch.load(args.output_model_path))
'''


def test_a_load_of_what_a_save_helper_just_wrote_gets_no_map_location(tmp_path, run_cli):
    """TencentPretrain's finetune scripts reload `args.output_model_path`, which
    `save_model(model, args.output_model_path)` wrote earlier in the same function from the
    model on the NPU: `map_location="cpu"` there was needless (12 hunks)."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "finetune.py", SAVE_THEN_LOAD)
    run_cli("--write", "--no-cache", ".")
    assert "map_location" not in path.read_text()


def test_a_load_without_that_save_still_maps_to_the_cpu(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "finetune.py", SAVE_THEN_LOAD.replace("save_model(model, args.output_model_path)",
                                                                 "save_model(model, args.other_path)"))
    run_cli("--write", "--no-cache", ".")
    assert 'torch.load(args.output_model_path, map_location="cpu")' in path.read_text()


TRT_DEMO = '''import torch


class Predictor:
    def __init__(self, model, trt_file=None):
        self.model = model
        if trt_file is not None:
            from torch2trt import TRTModule

            model_trt = TRTModule()
            model_trt.load_state_dict(torch.load(trt_file))
            x = torch.ones(1, 3, 64, 64).cuda()
            self.model(x)
            self.model = model_trt

    def inference(self, img):
        return self.model(img.cuda())
'''


def test_a_branch_that_imports_torch2trt_is_left(tmp_path, run_cli):
    """YOLOX's demo and evaluators: `if trt_file is not None: from torch2trt import TRTModule`
    builds a TensorRT module (no Ascend build); its `.cuda()` and `torch.load` were edited."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "demo.py", TRT_DEMO)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "x = torch.ones(1, 3, 64, 64).cuda()" in text
    assert "torch.load(trt_file))" in text
    assert "self.model(img.npu())" in text
    assert "this code uses TensorRT (`torch2trt`, imported at line" in result.output


NEWER_GRAMMAR = '''import torch

try:
    from flash_attn import flash_attn_func  # noqa

    _flash_available = torch.cuda.is_available()
except ImportError:
    _flash_available = False


class Attention[T]:
    def forward(self, q):
        return q
'''


def test_a_file_only_a_newer_python_parses_is_reported_not_rewritten(tmp_path, run_cli):
    """Fast-LLM (Python 3.12, PEP 695 generics) on 3.11: with no CPython tree, the gate
    analyses could not run, and the flag after each CUDA-only import was rewritten (held-out
    round 25). Under 3.12 the same file is analysed and its flag kept (next test)."""
    import sys

    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "attention.py", NEWER_GRAMMAR)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == NEWER_GRAMMAR
    if sys.version_info < (3, 12):
        assert "rejects this file's grammar (written for another, usually newer, Python)" in result.output


@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses PEP 695: the cell is analysed and migrated")
def test_a_notebook_cell_only_a_newer_python_parses_is_reported_not_rewritten(tmp_path, run_cli):
    """Issue 38 round 4: NPU013 left out notebooks (``not path.endswith(".ipynb")``), so a cell
    of PEP 695 grammar had its CUDA rewritten with no CPython tree to prove the edits, the very
    case NPU013 exists for. Magics and shell escapes are Python calls once joined, so a
    notebook's cells reach CPython's parser as a file's do."""
    import json

    (tmp_path / ".git").mkdir()
    cells = [{"cell_type": "code", "id": "a", "metadata": {}, "outputs": [], "execution_count": None,
              "source": ["import torch\n", "type V = list[int]\n", "x = torch.ones(1).cuda()\n"]},
             {"cell_type": "code", "id": "b", "metadata": {}, "outputs": [], "execution_count": None,
              "source": ["files = !ls\n", "y = torch.zeros(1).cuda()\n"]}]
    notebook = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    path = write(tmp_path, "nb.ipynb", notebook)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == notebook
    assert "nb.ipynb:cell 1:3:" in result.output and "NPU013" in result.output


def test_a_flag_set_after_a_cuda_only_import_is_kept(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    source = NEWER_GRAMMAR.replace("class Attention[T]:", "class Attention:")
    path = write(tmp_path, "attention.py", source)
    result = run_cli("--write", "--no-cache", ".")
    assert "_flash_available = torch.cuda.is_available()" in path.read_text()
    assert "the `try` above imports it" in result.output


# -- the held-out audit of issue 36 (2026-11-30) ---------------------------------------------

PRETRAIN = '''import torch
from megatron import get_args
from megatron.training import pretrain

if __name__ == "__main__":
    pretrain(get_args())
'''


def test_a_vendored_megatron_older_than_core_06_gets_no_mindspeed_adaptor(tmp_path, run_cli):
    """Megatron-DeepSpeed vendors a Megatron with megatron-core 0.2.0 (`megatron/training.py`
    a module): MindSpeed patches Megatron-LM from core 0.6 on, so its adaptor import (added
    to 28 entry scripts) failed or patched nothing."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "megatron/__init__.py", "def get_args():\n    return None\n")
    write(tmp_path, "megatron/training.py", "def pretrain(args):\n    pass\n")
    write(tmp_path, "megatron/core/__init__.py", "")
    path = write(tmp_path, "pretrain_gpt.py", PRETRAIN)
    result = run_cli("--write", "--no-cache", "pretrain_gpt.py")
    assert "mindspeed" not in path.read_text()
    assert "a Megatron-LM older than core 0.6" in result.output


def test_a_vendored_megatron_lm_of_today_gets_the_adaptor(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "megatron/__init__.py", "")
    write(tmp_path, "megatron/training/__init__.py", "def pretrain(args):\n    pass\n")
    write(tmp_path, "megatron/core/__init__.py", "")
    path = write(tmp_path, "pretrain_gpt.py", PRETRAIN.replace("from megatron import get_args\n", ""))
    run_cli("--write", "--no-cache", "pretrain_gpt.py")
    assert "import mindspeed.megatron_adaptor" in path.read_text()


def test_lmcache_nixl_buffer_device_is_left(tmp_path, run_cli):
    """vLLM production-stack's Helm values: `nixlBufferDevice: "cuda"` is LMCache's NIXL
    buffer (cpu or cuda), not a torch device; it had become "npu"."""
    (tmp_path / ".git").mkdir()
    source = 'lmcacheConfig:\n  enabled: true\n  nixlBufferDevice: "cuda"\n'
    path = write(tmp_path, "values.yaml", source)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == source
    assert "is a device of lmcache's" in result.output


def test_consecutive_asterisks_in_a_gitignore_name_are_one(tmp_path, run_cli):
    """vLLM production-stack's `.gitignore` holds `/testdata/**legacy**` (git: `*legacy*`):
    read as two `**` runs, it was refused as too costly and every run exited 2."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "/testdata/**legacy**\n")
    write(tmp_path, "testdata/old_legacy_run.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    result = run_cli("--write", "--no-cache", ".")
    assert result.exit_code == 0, result.output
    assert "torch.ones(1).npu()" in path.read_text()
    assert ".cuda()" in (tmp_path / "testdata/old_legacy_run.py").read_text()


@pytest.mark.timeout(120)
def test_an_escaped_asterisk_before_a_star_stays_a_literal_asterisk(tmp_path, run_cli):
    """Issue 38 round 4: consecutive asterisks were found by a regex over the text, so the
    escaped ``\\*`` of ``gen\\**b`` joined the wildcard after it: git ignores ``gen*_b.py``
    (a literal ``*`` then any name), npu-migrate read ``gen\\*b`` and migrated it."""
    from npu_migrate.pipeline.discovery import git_stars

    assert git_stars("gen\\**b") == "gen\\**b" and git_stars("\\\\**") == "\\\\*"
    assert git_stars("/testdata/**legacy**") == "/testdata/*legacy*" and git_stars("a/***/b") == "a/**/b"
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".gitignore", "gen\\**b.py\n")
    ignored = write(tmp_path, "gen*_b.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    result = run_cli("--write", "--no-cache", ".")
    assert result.exit_code == 0, result.output
    assert "torch.ones(1).npu()" in path.read_text() and ".cuda()" in ignored.read_text()


# -- held-out round 25 (2026-11-30) ------------------------------------------------------------

AVAILABLE = '''import torch


def get_available_devices():
    devices = []
    if torch.cuda.is_available():
        devices.append("cuda")
    devices.append("cpu")
    return devices
'''


def test_an_if_whose_branch_keeps_an_unproven_cuda_keeps_its_test(tmp_path, run_cli):
    """nerfstudio's get_available_devices: the test became `torch.npu.is_available()` while
    the "cuda" it appends (no device use proven) stayed: NPUs counted, "cuda" listed."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "devices.py", AVAILABLE)
    run_cli("--write", "--no-cache", ".")
    assert path.read_text() == AVAILABLE


RAY_TRAIN = '''import ray
from ray.train import ScalingConfig


def launch(use_gpu=True):
    num_gpus = int(ray.available_resources()["GPU"])
    return ScalingConfig(num_workers=num_gpus, use_gpu=use_gpu)
'''


def test_a_ray_count_beside_a_left_use_gpu_is_left(tmp_path, run_cli):
    """ArcticTraining's Ray launcher counted `available_resources()["NPU"]` for workers
    that `ScalingConfig(use_gpu=...)` (reported by NPU953, left) still asks for as GPUs."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "launcher.py", RAY_TRAIN)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == RAY_TRAIN
    assert "`use_gpu=use_gpu`" in result.output


def test_any_cuda_variable_of_a_script_that_reads_nvidia_smi_is_left(tmp_path, run_cli):
    """ArcticTraining's weekly benchmarks: `TORCH_CUDA_ARCH_LIST=$(nvidia-smi ...)` then
    `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, renamed on the NVIDIA machine it runs on."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    source = ("#!/bin/bash\nexport TORCH_CUDA_ARCH_LIST=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader)\n"
              "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\ntorchrun train.py\n")
    path = write(tmp_path, "bench.sh", source)
    run_cli("--write", "--no-cache", ".")
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in path.read_text()


SKYPILOT_JOB = '''name: e2e
resources:
  cloud: gcp
  accelerators: "A100:4"
envs:
  PYTORCH_CUDA_ALLOC_CONF: "garbage_collection_threshold:0.8,max_split_size_mb:128"
run: |
  torchrun train.py
'''


def test_env_of_a_job_that_asks_for_nvidia_gpus_by_model_is_left(tmp_path, run_cli):
    """oumi's SkyPilot jobs (`accelerators: "A100:4"`) run on NVIDIA machines: the renamed
    allocator setting was dropped there (9 wrong hunks in held-out round 25)."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "gcp_job.yaml", SKYPILOT_JOB)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == SKYPILOT_JOB
    assert "a job that asks for NVIDIA GPUs by model (`A100:4`)" in result.output


def test_env_of_a_job_without_a_gpu_model_is_renamed(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    write(tmp_path, "train.py", "import torch\n\ntorch.ones(1).cuda()\n")
    path = write(tmp_path, "job.yaml", SKYPILOT_JOB.replace('  accelerators: "A100:4"\n', ""))
    run_cli("--write", "--no-cache", ".")
    assert "PYTORCH_NPU_ALLOC_CONF" in path.read_text()


def test_a_branch_that_imports_tensorrt_is_left_too(tmp_path, run_cli):
    """The prefilter of the torch2trt fix looked for "trt", which `import tensorrt` does not
    contain: a branch importing TensorRT itself was migrated (found reading the change)."""
    (tmp_path / ".git").mkdir()
    source = TRT_DEMO.replace("from torch2trt import TRTModule", "import tensorrt as TRTModule")
    path = write(tmp_path, "demo.py", source)
    result = run_cli("--write", "--no-cache", ".")
    assert "x = torch.ones(1, 3, 64, 64).cuda()" in path.read_text()
    assert "this code uses TensorRT (`tensorrt`, imported at line" in result.output


SET_DEVICE = '''import os

import torch


def setup():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        device = "cpu"
    return device
'''


def test_the_branch_of_an_unproven_cuda_stays_with_its_test(tmp_path, run_cli):
    """RLinf's setup (read side by side before and after this session's change): keeping only
    the test left `torch.npu.set_device` under `torch.cuda.is_available()`; the branch that
    names "cuda:N" stays whole with its test."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "dist.py", SET_DEVICE)
    run_cli("--write", "--no-cache", ".")
    assert path.read_text() == SET_DEVICE


RNG_CHECK = '''import torch
from accelerate.utils import synchronize_rng_states


def rng_sync_check(state, same):
    synchronize_rng_states(["torch"])
    if state.multi_gpu:
        synchronize_rng_states(["cuda"])
        assert same(torch.cuda.get_rng_state()), "GPU states differ"
'''


def test_every_statement_of_a_held_branch_is_reported(tmp_path, run_cli):
    """The held branch's other statements keep their CUDA and must say so on their own line:
    accelerate's rng_sync_check kept `torch.cuda.get_rng_state()` under its
    `synchronize_rng_states(["cuda"])` with no finding (the corpus audit's silent leftover)."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "check.py", RNG_CHECK)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == RNG_CHECK
    assert "check.py:8:" in result.output  # the unproven "cuda"
    assert "check.py:9:" in result.output and "its branch also holds" in result.output
    again = run_cli("--write", "--no-cache", ".")
    assert again.output == result.output


ORT_VALUE = '''import onnxruntime as ort
import torch


def bench(session, array):
    device = "cuda"
    tensor = torch.ones(2).to(device)
    value = ort.OrtValue.ortvalue_from_numpy(array, device, 0)
    return session.run_with_ort_values(["y"], {"x": value}), tensor
'''


def test_a_device_name_read_by_torch_and_by_onnxruntime_is_left(tmp_path, run_cli):
    """A name that torch moves tensors to and onnxruntime takes as its own device name (an
    OrtValue, not an IOBinding) has no one right value: left, and NPU108 says who reads it."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "ort_bench.py", ORT_VALUE)
    result = run_cli("--write", "--no-cache", ".")
    assert path.read_text() == ORT_VALUE
    assert "ort_bench.py:6:" in result.output and "onnxruntime's `ortvalue_from_numpy`" in result.output


LAZY_CLI = '''import os


def detect(env):
    import torch  # importing torch takes time: only in this scenario

    if not torch.cuda.is_available():
        raise RuntimeError("no GPUs")
    return torch.cuda.device_count()


def version():
    import torch

    return torch.__version__


def main():
    print(os.getcwd())
'''


def test_a_module_that_imports_torch_lazily_gets_its_guard_beside_that_import(tmp_path, run_cli):
    """oumi's CLI imports torch only in the functions that need it (its speed regression test
    times `import oumi.cli.main`); the guard at the top imported torch_npu, and torch with
    it, when the CLI was imported (held-out round 25). The guard goes where torch is
    imported, and a second run changes and reports nothing."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "cli.py", LAZY_CLI)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    head, _, rest = text.partition("def detect(env):")
    assert "torch_npu" not in head
    assert rest.startswith('''
    import torch  # importing torch takes time: only in this scenario
    try:
        import torch_npu  # noqa: F401
    except ModuleNotFoundError:  # no torch_npu here: the CPU path runs as before
        torch.npu = torch.cuda
''')
    assert "if not torch.npu.is_available():" in text
    assert text.count("import torch_npu") == 1  # not in `version()`, which names no NPU
    again = run_cli("--check", "--no-cache", ".")
    assert again.exit_code == 0 and "NPU010" not in again.output, again.output


LAZY_ENTRY = '''def main():
    import torch

    torch.distributed.init_process_group("nccl")
    return torch.nn.Linear(2, 2).cuda()


if __name__ == "__main__":
    main()
'''


def test_the_runtime_guard_of_a_lazy_module_without_the_torch_npu_guard(tmp_path, run_cli):
    """The lazy placement of the torch_npu guard had been pasted into the runtime guard's
    placement too, with names that function does not have: with NPU100 ignored, an entry
    script that imports torch only in `main()` ended in an internal NameError (found
    reading the change). The runtime guard goes after the leading imports, as before."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "train.py", LAZY_ENTRY)
    result = run_cli("--write", "--no-cache", "--ignore", "NPU100", ".")
    assert result.exit_code == 0 and "internal error" not in result.output, result.output
    assert path.read_text().startswith("try:\n    import npu_runtime\n")
