"""The classifier of CUDA-only code and the gates in front of it (NPU011,
``npu_migrate/python/cuda_only.py``), beyond the golden fixtures: the name table,
project facts (a Triton package of the project), and what must stay a rewrite."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.facts import ProjectFacts
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.cuda_only import (
    KIND_COMPILED,
    KIND_CUDA_MODULE,
    KIND_CUSTOM_OP,
    KIND_DATA_PARALLEL,
    KIND_EXTENSION_BUILD,
    KIND_KERNEL_PACKAGE,
    KIND_TORCH_BINDING,
    classify_name,
)
from npu_migrate.python.engine import migrate_source

SETTINGS = Settings(selection=Selection.create(["NPU1", "NPU011", "NPU9"]))

SSM_KERNELS = "a state-space kernel package, which does not run on Ascend"


@pytest.mark.parametrize("name,kind", [
    ("maskrcnn_benchmark._C", KIND_COMPILED),
    ("._C.nms", KIND_COMPILED),
    ("amp_C.multi_tensor_scale", "apex, which does not run on Ascend"),
    # the packages NPU915 reports carry its label (a kernel kind: kernel_import accepts it)
    ("selective_scan_cuda.fwd", SSM_KERNELS),
    ("mamba_ssm.ops.selective_scan_interface.mamba_inner_fn", SSM_KERNELS),
    ("causal_conv1d.causal_conv1d_fn", SSM_KERNELS),
    ("helion.kernel", "Triton, which does not run on Ascend"),
    ("alignment_train_cuda_binding.alignment_train_cuda", KIND_COMPILED),
    ("numba.cuda.jit", KIND_CUDA_MODULE),
    ("._ext.lib.gpu.nms", KIND_CUDA_MODULE),
    ("torch.nn.DataParallel", KIND_DATA_PARALLEL),
    ("torch.nn.parallel.data_parallel", KIND_DATA_PARALLEL),
    ("torch.utils.cpp_extension.CUDAExtension", KIND_EXTENSION_BUILD),
    ("torch._C._cuda_getDeviceCount", KIND_TORCH_BINDING),
    ("torch.ops.my_ext.deform_conv", KIND_CUSTOM_OP),
    ("triton.language.load", "Triton, which does not run on Ascend"),
    ("cupy.cumsum", "CuPy/PyCUDA, which does not run on Ascend"),
])
def test_cuda_only_names(name, kind):
    assert classify_name(name) == kind


@pytest.mark.parametrize("name", [
    "torch.cuda.synchronize",       # rewritable: NPU101
    "torch.ops.aten.add",           # torch's own operators
    "torch.ops.torchvision.nms",
    "torch._C._nn.linear",
    "utils.is_cuda_available",      # a predicate, not a kernel module
    "helpers.get_cuda_version",
    "numpy.zeros",
    "deepspeed.ops.adam.FusedAdam",  # DeepSpeed builds it for NPU
    "config.MAX_C",
])
def test_not_cuda_only(name):
    assert classify_name(name) is None


def test_a_triton_package_of_the_project_makes_its_gate_a_kernel_gate(tmp_path, run_cli):
    """litgpt's unsloth executor: `import kernels` (a package of Triton modules) and
    checkers registered next to the kernels they guard."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("from .swiglu import swiglu_fg_kernel  # noqa: F401\n")
    (tmp_path / "kernels" / "swiglu.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _fg_kernel(e, g, h, n):\n    pass\n\n\n"
        "def swiglu_fg_kernel(e, g):\n    _fg_kernel[(1,)](e, g, e, 1)\n    return e\n"
    )
    (tmp_path / "executor.py").write_text(
        "import torch\nimport kernels\n\n\ndef swiglu_forward(e, g):\n    return kernels.swiglu_fg_kernel(e, g)\n\n\n"
        "def swiglu_checker(e, g):\n    return e.device.type == \"cuda\" and g.device.type == \"cuda\"\n\n\n"
        "register_implementation(swiglu, checker=swiglu_checker, execution_transform=swiglu_forward)\n"
    )
    result = run_cli("executor.py", "kernels", "--no-cache")
    assert "+++ b/executor.py" not in result.output  # no diff: the gate stays
    assert "NPU011 `e.device.type == \"cuda\" and g.device.type == \"cuda\"` guards `swiglu_forward`" in result.output
    assert "register_implementation(...)` does not use it" in result.output


def test_project_facts_know_the_triton_modules(tmp_path):
    (tmp_path / "pkg" / "kernels").mkdir(parents=True)
    files = {
        tmp_path / "pkg" / "kernels" / "__init__.py": b"from .rope import rope\n",
        tmp_path / "pkg" / "kernels" / "rope.py": b"import triton\n",
        tmp_path / "pkg" / "model.py": b"import torch\n",
        tmp_path / "other" / "kernels.py": b"import numpy\n",  # a second `kernels`, not Triton
    }
    facts = ProjectFacts.scan((str(path), data) for path, data in files.items())
    assert facts.is_cuda_only_module("pkg.kernels.rope") and facts.is_cuda_only_module("pkg.kernels")
    assert facts.is_cuda_only_module("rope")
    assert not facts.is_cuda_only_module("kernels")  # ambiguous: other/kernels.py is plain Python
    assert not facts.is_cuda_only_module("pkg.model")
    assert facts.key() != ProjectFacts.scan([]).key()


@pytest.mark.parametrize("source", [
    # the branch moves the model and has no else: skipping it would leave the model on the CPU
    "import torch\nimport torch.nn as nn\nif torch.cuda.is_available():\n    model.cuda()\n    model = nn.DataParallel(model)\n",
    # nothing CUDA-only behind the test
    "import torch\nif x.is_cuda:\n    x = x.contiguous()\n",
    # a value, not a test
    "import torch\nfrom maskrcnn_benchmark import _C\ndevice = 'cuda'\nif flag:\n    _C.nms(device)\n",
])
def test_tests_in_front_of_ordinary_code_are_still_rewritten(source):
    result = migrate_source("t.py", source.encode(), SETTINGS)
    assert result.new_source is not None
    assert "NPU011" not in {f.rule for f in result.findings}


def test_a_test_module_of_a_triton_module_of_the_project_is_left_alone(tmp_path, run_cli):
    """axolotl's tests/monkeypatch/test_flash_attn_d512.py: `needs CUDA` only, but what it
    tests is a Triton kernel of the project (imported inside the tests), so its gate and
    devices stay CUDA's; the same test module of plain code is migrated. The answer does
    not depend on which paths are given."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "attn_d512.py").write_text(
        "import torch\nimport triton\n\n\n@triton.jit\ndef _fwd(q):\n    pass\n\n\ndef flash(q):\n    return q\n")
    (tmp_path / "pkg" / "plain.py").write_text("import torch\n\n\ndef double(x):\n    return x * 2\n")
    (tmp_path / "tests").mkdir()
    test = ('import pytest\nimport torch\n\npytestmark = pytest.mark.skipif(not torch.cuda.is_available(), '
            'reason="needs CUDA")\n\nDEV = "cuda"\n\n\ndef test_it():\n    from pkg.{} import {}\n\n'
            '    {}(torch.ones(2, device=DEV))\n')
    (tmp_path / "tests" / "test_d512.py").write_text(test.format("attn_d512", "flash", "flash"))
    (tmp_path / "tests" / "test_plain.py").write_text(test.format("plain", "double", "double"))
    for paths in (("tests",), ("tests/test_d512.py", "tests/test_plain.py")):
        result = run_cli(*paths, "--no-cache")
        assert "+++ b/tests/test_d512.py" not in result.output
        assert "tests/test_d512.py:4:" in result.output and "a test module of CUDA/Triton kernels" in result.output
        assert '+DEV = "npu"' in result.output  # test_plain.py


def test_a_module_skipped_for_a_kernel_is_a_kernel_test_module():
    source = ('import pytest\nimport torch\n\npytestmark = pytest.mark.skipif(not torch.cuda.is_available(), '
              'reason="varlen_attn needs CUDA")\n\nDEV = "cuda"\n\n\ndef test_fallback():\n'
              '    assert torch.ones(1, device=DEV).is_cuda\n')
    result = migrate_source("tests/test_varlen.py", source.encode(), SETTINGS)
    assert result.new_source is None
    assert [(f.line, f.rule) for f in result.findings] == [(4, "NPU011")]
    plain = migrate_source("tests/test_varlen.py", source.replace("varlen_attn needs", "needs").encode(), SETTINGS)
    assert plain.new_source is not None and b'DEV = "npu"' in plain.new_source


def test_a_module_of_the_projects_kernels_is_left_alone(tmp_path, run_cli):
    """unsloth's unsloth/kernels/rms_layernorm.py: Triton code in a file named for kernels;
    its grid sizing (`multi_processor_count`), streams and devices exist for the kernels.
    A training script that defines a Triton kernel is still migrated."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "kernels").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "kernels" / "__init__.py").write_text("")
    kernel = ("import torch\nimport triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n\n\ndef sms(device):\n"
              "    return torch.cuda.get_device_properties(device).multi_processor_count\n")
    (tmp_path / "pkg" / "kernels" / "rms.py").write_text(kernel)
    (tmp_path / "train.py").write_text(kernel + "\n\nif __name__ == '__main__':\n    x = torch.ones(2).cuda()\n")
    result = run_cli(".", "--no-cache")
    assert "+++ b/pkg/kernels/rms.py" not in result.output
    assert "pkg/kernels/rms.py:11:" in result.output and "a module of this project's Triton/CUDA kernels" in result.output
    assert "+++ b/train.py" in result.output


def test_a_package_module_that_defines_a_kernel_is_left_alone(tmp_path, run_cli):
    """unsloth's studio/.../diffusion_flux2_rope.py: a Triton kernel built in a factory and an
    eligibility check (`not x.is_cuda`) in front of it, in a file not named for kernels."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    rope = ("import functools\n\nimport torch\n\n\n@functools.lru_cache(maxsize=1)\ndef _kernel():\n"
            "    import triton\n\n    @triton.jit\n    def _rope(x_ptr):\n        pass\n\n    return _rope\n\n\n"
            "def eligible(x):\n    if not x.is_cuda or x.dim() != 4:\n        return False\n    return True\n")
    (tmp_path / "pkg" / "rope.py").write_text(rope)
    (tmp_path / "pkg" / "plain.py").write_text("import torch\n\n\ndef on_gpu(x):\n    return x.is_cuda\n")
    (tmp_path / "pkg" / "use.py").write_text("from pkg.plain import on_gpu\nfrom pkg.rope import eligible\n")
    result = run_cli(".", "--no-cache")
    assert "+++ b/pkg/rope.py" not in result.output
    assert "pkg/rope.py:" in result.output and "(it defines a kernel)" in result.output
    assert "+++ b/pkg/plain.py" in result.output


def test_a_package_module_named_for_an_nvidia_only_feature_is_left_alone(tmp_path, run_cli):
    """unsloth's diffusion_nvfp4_install.py, ultralytics' backends/tensorrt.py: their device
    tests decide whether NVFP4 kernels or TensorRT run. A script named for the feature, and
    a package module that trains, are still migrated."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    gate = 'import torch\n\n\ndef install(dev):\n    if dev is None or dev.type != "cuda":\n        return False\n    return True\n'
    (tmp_path / "pkg" / "nvfp4_install.py").write_text(gate)
    (tmp_path / "pkg" / "fp8_train.py").write_text(gate + "\n\ndef step(loss):\n    loss.backward()\n")
    (tmp_path / "train_fp8.py").write_text(gate)
    for paths in ((".",), ("pkg/nvfp4_install.py", "pkg/fp8_train.py", "train_fp8.py")):
        result = run_cli(*paths, "--no-cache")
        assert "+++ b/pkg/nvfp4_install.py" not in result.output
        assert "pkg/nvfp4_install.py:5:" in result.output and "its path names `nvfp4`" in result.output
        assert "+++ b/pkg/fp8_train.py" in result.output and "+++ b/train_fp8.py" in result.output


def test_a_transport_built_on_nixl_is_left_alone(tmp_path, run_cli):
    """prime-rl's transports/weights/nixl/ (a cudaMalloc pool registered with NIXL as CUDA
    memory) and inference/vllm/worker/nixl.py: NVIDIA's transfer library moves CUDA memory;
    renaming their device calls served nothing (round 9: 18 needless hunks)."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "nixl").mkdir(parents=True)
    for folder in ("pkg", "pkg/nixl"):
        (tmp_path / folder / "__init__.py").write_text("")
    body = 'import torch\n\n\ndef stage(n):\n    torch.cuda.synchronize()\n    return torch.empty(n, device="cuda")\n'
    (tmp_path / "pkg" / "nixl" / "pool.py").write_text(body)
    (tmp_path / "pkg" / "nixl_worker.py").write_text(body)
    (tmp_path / "pkg" / "nixlike.py").write_text(body)
    result = run_cli(".", "--no-cache")
    assert "+++ b/pkg/nixl/pool.py" not in result.output and "+++ b/pkg/nixl_worker.py" not in result.output
    assert "its path names `nixl`" in result.output
    assert "+++ b/pkg/nixlike.py" in result.output


def test_a_package_module_named_for_rocm_is_left_alone(tmp_path, run_cli):
    """unsloth's diffusion_qwenimage21_rocm.py, verl's platform_rocm.py: AMD's implementation,
    where torch.cuda and "cuda" mean HIP. A module whose folder only mentions it, and a
    word that merely contains the letters, are migrated."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "rocm").mkdir(parents=True)
    for folder in ("pkg", "pkg/rocm"):
        (tmp_path / folder / "__init__.py").write_text("")
    gate = 'import torch\n\n\ndef chunked(x):\n    if x.device.type != "cuda":\n        return None\n    return x\n'
    (tmp_path / "pkg" / "attention_rocm.py").write_text(gate)
    (tmp_path / "pkg" / "shipping.py").write_text(gate)
    (tmp_path / "pkg" / "rocm" / "plain.py").write_text(gate)
    for paths in ((".",), ("pkg/attention_rocm.py", "pkg/shipping.py", "pkg/rocm/plain.py")):
        result = run_cli(*paths, "--no-cache")
        assert "+++ b/pkg/attention_rocm.py" not in result.output
        assert "pkg/attention_rocm.py:5:" in result.output and "AMD ROCm's implementation" in result.output
        assert "+++ b/pkg/shipping.py" in result.output and "+++ b/pkg/rocm/plain.py" in result.output


def test_a_module_in_a_folder_named_for_the_npu_is_left_alone(tmp_path, run_cli):
    """ms-swift's swift/model/npu_patch/: its torch.cuda fallback for a missing torch.npu stays,
    and no torch_npu import is added; a file whose own name says npu is migrated as usual."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "npu_patch").mkdir(parents=True)
    code = ("import torch\n\n\ndef current_device():\n    if hasattr(torch, 'npu'):\n"
            "        return torch.device('npu', torch.npu.current_device())\n    return torch.cuda.current_device()\n")
    (tmp_path / "pkg" / "npu_patch" / "devices.py").write_text(code)
    (tmp_path / "pkg" / "npu_aware_probe.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    result = run_cli(".", "--no-cache")
    assert "+++ b/pkg/npu_patch/devices.py" not in result.output
    assert "pkg/npu_patch/devices.py:7:" in result.output and "written for Ascend" in result.output
    assert "+++ b/pkg/npu_aware_probe.py" in result.output


def test_a_kernel_module_with_a_self_test_main_block_is_still_a_kernel_module(tmp_path, run_cli):
    """mamba's mamba_ssm/ops/triton/mamba3/mamba3_mimo_utils.py: Triton kernels and a
    `__main__` block that checks them on `device='cuda'`. A package module whose `__main__`
    trains is still migrated, as a script that defines a kernel is."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "triton").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "triton" / "__init__.py").write_text("")
    kernel = ("import torch\nimport triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n\n\n"
              "if __name__ == '__main__':\n    x = torch.ones(4, device='cuda')\n")
    (tmp_path / "pkg" / "triton" / "utils.py").write_text(kernel)
    (tmp_path / "pkg" / "triton" / "train_k.py").write_text(kernel + "    x.sum().backward()\n")
    result = run_cli(".", "--no-cache")
    assert "+++ b/pkg/triton/utils.py" not in result.output
    assert "pkg/triton/utils.py:11:" in result.output and "its path names `triton`" in result.output
    assert "+++ b/pkg/triton/train_k.py" in result.output


_TESTING_HELPERS = (
    "import pytest\nimport torch\n\nhas_cuda = torch.cuda.is_available()\n"
    "{probe}"
    'GPU_MARKS = (pytest.mark.gpu, pytest.mark.skipif(not has_cuda, reason="Requires a GPU"))\n\n\n'
    "def requires_gpu(func):\n    for mark in GPU_MARKS:\n        func = mark(func)\n    return func\n")
_MARKED_TEST = (
    "import torch\n\nfrom pkg.testing import requires_gpu\n\n\n"
    "def _run_fsdp(model):\n    return model.cuda()\n\n\n"
    "@requires_gpu\ndef test_fsdp():\n    _run_fsdp(torch.nn.Linear(2, 2))\n    x = torch.ones(2, device='cuda')\n\n\n"
    "def test_cpu():\n    x = torch.ones(2, device='cuda' if torch.cuda.is_available() else 'cpu')\n")


@pytest.mark.parametrize("probe, kept", [
    ("compute_capability = torch.cuda.get_device_capability()[0] if has_cuda else None\n", True),
    ("", False),
])
def test_tests_marked_by_the_projects_own_cuda_skip_mark(tmp_path, run_cli, probe, kept):
    """OLMo-core's olmo_core/testing/utils.py: `requires_gpu` skips on `has_cuda`, which the
    migration keeps a CUDA test there (it also gates a compute-capability probe). Every test
    it marks is then skipped on Ascend: their bodies, and helpers only they use, keep their
    devices; the same marks over a flag the migration rewrites leave the tests migrated.
    The answer is the same whichever paths are given."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .testing import requires_gpu\n")
    (tmp_path / "pkg" / "testing.py").write_text(_TESTING_HELPERS.format(probe=probe))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_model.py").write_text(_MARKED_TEST)
    for paths in ((".",), ("tests/test_model.py",)):
        result = run_cli(*paths, "--no-cache")
        assert ("+    return model.npu()" not in result.output) is kept
        assert ("+    x = torch.ones(2, device='npu')" not in result.output) is kept
        assert "+    x = torch.ones(2, device='npu' if torch.npu.is_available() else 'cpu')" in result.output
        assert ("the project's own `requires_gpu` skips on Ascend" in result.output) is kept
