"""Round 20's needless families (edits in code that never runs on Ascend), one per test.
Each test fails on the engine before its fix."""

from __future__ import annotations

from ._files import write

OFFLOADER = '''import torch


def clean(device):
    if device.type == "cuda":
        torch.cuda.empty_cache()


class Offloader:
    def __init__(self, device):
        self.device = device
        self.cuda_available = device.type == "cuda"
        self.stream = torch.cuda.Stream(device=device) if self.cuda_available else None

    def swap_cuda(self, a, b):
        torch.cuda.current_stream().synchronize()
        with torch.cuda.stream(self.stream):
            event = torch.cuda.Event()
        return event

    def swap(self, a, b):
        if self.cuda_available:
            return self.swap_cuda(a, b)
        return None

    def wait(self, event):
        torch.cuda.set_device(self.device.index or 0)
        if self.cuda_available and event is not None:
            torch.cuda.current_stream().wait_event(event)
'''


def test_every_branch_of_a_kept_flag_stays_cuda(tmp_path, run_cli):
    """The flag's gate is kept (it opens the class's CUDA method); the other branches it opens,
    and the method reached only through them, never run on the NPU and keep their code."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "offload.py", OFFLOADER)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'self.cuda_available = device.type == "cuda"' in text, result.output
    assert "torch.cuda.Stream(device=device) if self.cuda_available" in text
    assert "torch.cuda.current_stream().synchronize()" in text and "torch.cuda.Event()" in text
    assert "torch.cuda.current_stream().wait_event(event)" in text
    # code the NPU does run is still migrated
    assert 'if device.type == "npu":\n        torch.npu.empty_cache()' in text
    assert "torch.npu.set_device(self.device.index or 0)" in text


def test_a_flag_assigned_twice_opens_only_the_gates_branch(tmp_path, run_cli):
    """Where the flag is also set elsewhere the tool cannot say it is false on the NPU, so
    only the gate's own branch is held (as before)."""
    (tmp_path / ".git").mkdir()
    twice = OFFLOADER.replace("        self.device = device\n",
                              "        self.device = device\n        self.cuda_available = False\n")
    path = write(tmp_path, "offload.py", twice)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "torch.npu.current_stream().wait_event(event)" in text


SETUP = """from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(name="fused_window", ext_modules=[CUDAExtension("fused_window", ["fused_window.cpp", "kernel.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""
KERNEL_TEST = "import torch\nimport fused_window\n\nx = torch.ones(2).cuda()\ntorch.cuda.synchronize()\n"
KERNEL_USER = "import torch\n\ntry:\n    import fused_window\nexcept ImportError:\n    fused_window = None\n\nx = torch.ones(2).cuda()\n"


def test_a_module_importing_a_cuda_extension_the_project_builds_is_left(tmp_path, run_cli):
    """``kernels/setup.py`` builds ``fused_window`` from ``.cu`` sources only: a module that
    imports it at module level cannot import on Ascend; one that imports it under ``try``
    still runs (its fallback) and is migrated."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "kernels/setup.py", SETUP)
    test = write(tmp_path, "kernels/window_bench.py", KERNEL_TEST)
    user = write(tmp_path, "model.py", KERNEL_USER)
    result = run_cli("--write", "--no-cache", ".")
    assert test.read_text() == KERNEL_TEST
    assert "imports `fused_window` at module level (line 2), which has no Ascend build" in result.output
    assert "torch.ones(2).npu()" in user.read_text()


def test_an_extension_also_built_for_the_cpu_does_not_block(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    both = SETUP.replace('ext_modules=[', 'ext_modules=[CppExtension("fused_window", ["cpu.cpp"]) if cpu else ')
    write(tmp_path, "kernels/setup.py", both)
    test = write(tmp_path, "kernels/window_bench.py", KERNEL_TEST)
    run_cli("--write", "--no-cache", ".")
    assert "torch.ones(2).npu()" in test.read_text()


PROTOCOL = "from tensordict import TensorDict\n\n\nclass Proto:\n    batch: TensorDict = None\n"
WORKER = """import torch


def step(data, model, x, i):
    data.batch = data.batch.cuda()
    model = model.cuda(non_blocking=True)
    y = x.cuda(i)
    z = x.cuda(device=torch.cuda.current_device())
    return data, model, y, z


if __name__ == "__main__":
    step(None, None, None, 0)
"""


def test_a_project_using_tensordict_moves_with_to(tmp_path, run_cli):
    """verl's ``data.batch.cuda()``: the batch is a TensorDict, which has no ``.npu()``;
    in a project that uses tensordict every ``.cuda()`` becomes ``.to("npu")``, and one
    with a device argument is reported."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/protocol.py", PROTOCOL)
    worker = write(tmp_path, "pkg/worker.py", WORKER)
    result = run_cli("--write", "--no-cache", ".")
    text = worker.read_text()
    assert 'data.batch = data.batch.to("npu")' in text
    assert 'model = model.to("npu", non_blocking=True)' in text
    assert "y = x.cuda(i)" in text and "x.cuda(device=torch.cuda.current_device())" in text
    assert "the project uses tensordict" in result.output
    assert ".npu()" not in text


def test_without_tensordict_cuda_becomes_npu(tmp_path, run_cli):
    (tmp_path / ".git").mkdir()
    worker = write(tmp_path, "pkg/worker.py", WORKER)
    run_cli("--write", "--no-cache", ".")
    assert "data.batch = data.batch.npu()" in worker.read_text()


def test_the_arguments_of_a_left_cuda_call_stay_cuda(tmp_path, run_cli):
    """verl's ``model_module.cuda(torch.cuda.current_device())`` in a tensordict project: the
    call is reported and left, and its argument with it (not ``.cuda(torch.npu...)``)."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/protocol.py", PROTOCOL)
    source = ("import torch\n\n\ndef place(model):\n    model.cuda(torch.cuda.current_device())\n"
              "    torch.cuda.empty_cache()\n\n\nif __name__ == '__main__':\n    place(None)\n")
    path = write(tmp_path, "pkg/place.py", source)
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "model.cuda(torch.cuda.current_device())" in text
    assert "torch.npu.empty_cache()" in text


FLASH_PREDICATE = '''import importlib.metadata

import torch


def is_flash_attn_2_available():
    if not torch.cuda.is_available():
        return False
    return bool(torch.version.cuda)


def has_accelerator():
    if not torch.cuda.is_available():
        return False
    return True
'''


def test_a_predicate_named_for_a_cuda_only_package_keeps_its_cuda_test(tmp_path, run_cli):
    """A copy of transformers' ``is_flash_attn_2_available``: its early ``return False``
    without CUDA is the package's own answer on the NPU; a predicate named for nothing
    CUDA-only is migrated."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "flash.py", FLASH_PREDICATE)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    first, second = text.split("def has_accelerator")
    assert "if not torch.cuda.is_available():" in first
    assert "if not torch.npu.is_available():" in second
    assert "NPU011" in result.output


TENSORRT = '''import torch


class Flow(torch.nn.Module):
    def run(self, x):
        if isinstance(self.estimator, torch.nn.Module):
            torch.cuda.synchronize()
            return self.estimator(x)
        else:
            context, engine = self.estimator.acquire()
            torch.cuda.current_stream().synchronize()
            context.set_tensor_address(engine.get_tensor_name(0), x.data_ptr())
            assert context.execute_async_v3(torch.cuda.current_stream().cuda_stream)
            return x


class Contexts:
    def __init__(self, engine, device="cuda:0"):
        self.context = engine.create_execution_context()
        self.stream = torch.cuda.Stream(device)


if __name__ == "__main__":
    Flow().run(torch.ones(1).cuda())
'''


def test_code_that_runs_a_tensorrt_context_keeps_its_cuda(tmp_path, run_cli):
    """CosyVoice's estimator: the branch that runs a TensorRT execution context, and the
    constructor that makes one, hand CUDA streams and pointers to TensorRT; the module's
    own branch is migrated."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "flow.py", TENSORRT)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "            torch.npu.synchronize()\n            return self.estimator(x)" in text
    assert "assert context.execute_async_v3(torch.cuda.current_stream().cuda_stream)" in text
    assert "            torch.cuda.current_stream().synchronize()\n            context.set" in text
    assert 'device="cuda:0"' in text and "torch.cuda.Stream(device)" in text
    assert result.output.count("runs a TensorRT execution context") == 2


MEGATRON_WORKER = '''import os

import torch
from megatron.core import parallel_state as mpu


class LayerWorker:
    def __init__(self):
        torch.distributed.init_process_group(backend="nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        mpu.initialize_model_parallel(tensor_model_parallel_size=2)
        from megatron.core import tensor_parallel
        if torch.cuda.device_count() > 0:
            tensor_parallel.model_parallel_cuda_manual_seed(10)

    def init_model(self, config):
        from pkg.layers import ParallelMLP
        self.layer = ParallelMLP(config)

    def get_weights(self):
        return {key: val for key, val in self.layer.named_parameters()}

    def weights_by_loop(self):
        out = {}
        for key, val in self.layer.named_parameters():
            out[key] = val.cuda()
        return out

    def run(self, x):
        return self.layer(x.to("cuda"))


if __name__ == "__main__":
    LayerWorker()
'''


def test_megatrons_cuda_named_functions_are_no_compiled_code(tmp_path, run_cli):
    """``model_parallel_cuda_manual_seed`` is Megatron's Python (MindSpeed runs it on the
    NPU): the device-count test in front of it is migrated with the rest of ``__init__``."""
    (tmp_path / ".git").mkdir()
    path = write(tmp_path, "worker.py", MEGATRON_WORKER.replace("\n    def init_model", "\n    def _unused_init_model"))
    run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert "if torch.npu.device_count() > 0:" in text and 'backend="hccl"' in text


def test_a_loops_iterable_runs_on_every_call(tmp_path, run_cli):
    """verl's tutorial worker: ``get_weights`` and ``weights_by_loop`` read ``self.layer``
    (in a comprehension's and a loop's iterable), which only ``init_model`` sets, and
    ``init_model`` imports a module that cannot import; so the whole object can do nothing
    on Ascend and its ``__init__`` keeps its process group."""
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/layers.py", "import torch\nimport flash_attn\n\n\nclass ParallelMLP(torch.nn.Module):\n    pass\n")
    path = write(tmp_path, "worker.py", MEGATRON_WORKER)
    result = run_cli("--write", "--no-cache", ".")
    text = path.read_text()
    assert 'backend="nccl"' in text and "val.cuda()" in text, result.output
    assert "`weights_by_loop` cannot run on Ascend" in result.output
