"""The torch-npu API table: the shipped data, the loader, and the generator script."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from npu_migrate.pipeline.npu_api import load_api

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen_torch_npu_api.py"


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_torch_npu_api", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the shipped table -------------------------------------------------------------------------
def test_table_loads_and_is_cached():
    api = load_api()
    assert api.version == "2.13.0"
    assert load_api() is api
    raw = json.loads((REPO / "npu_migrate" / "data" / "torch_npu_api.json").read_text())
    assert set(raw) == {
        "torch_npu_version",
        "generated_by",
        "modules",
        "unusable",
        "env_vars",
    }
    assert raw["generated_by"] == "scripts/gen_torch_npu_api.py"
    for names in raw["modules"].values():
        assert names == sorted(set(names))
    assert raw["env_vars"] == sorted(set(raw["env_vars"]))


def test_loader_does_not_import_torch():
    code = "import sys; from npu_migrate.pipeline.npu_api import load_api; load_api(); print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "name",
    [
        "torch.npu.synchronize",
        "torch.npu.set_device",
        "torch.npu.device_count",
        "torch.npu.manual_seed_all",
        "torch.npu.current_stream",
        "torch.npu.Stream",
        "torch.npu.Event",
        "torch.npu.NPUGraph",
        "torch.npu.make_graphed_callables",
        "torch.npu.FloatTensor",
        "torch.npu.amp",
        "torch.npu.amp.autocast",
        "torch.npu.amp.GradScaler",
        "torch.npu.get_autocast_dtype",
        "torch.npu.memory.memory_allocated",
        "torch.npu.matmul.allow_hf32",
        "torch.npu.conv.allow_hf32",
        "torch_npu.npu_fusion_attention",
        "torch_npu.npu_rms_norm",
        "torch_npu.npu_rotary_mul",
        "torch_npu.npu_swiglu",
        "torch_npu.optim.NpuFusedAdamW",
        "torch_npu.utils.save_async",
        "torch_npu.contrib.transfer_to_npu",
        "torch.distributed.is_hccl_available",
        "torch.Tensor.npu",
        "torch.Tensor.is_npu",
        "torch.nn.Module.npu",
        "torch.ops.npu.npu_rms_norm",
        "torch_npu.profiler.profile",
        "torch_npu.profiler.schedule",
        "torch_npu.profiler.tensorboard_trace_handler",
        "torch_npu.profiler.supported_activities",
        "torch_npu.profiler.ProfilerActivity.CPU",
        "torch_npu.profiler.ProfilerActivity.NPU",
        "torch_npu.profiler.ProfilerAction.RECORD_AND_SAVE",
        "torch_npu.profiler.ProfilerLevel.Level1",
    ],
)
def test_known_names_present(name):
    assert load_api().has(name)


@pytest.mark.parametrize(
    "name",
    [
        "torch.npu.nvtx",
        "torch.npu.nccl",
        "torch.npu.CUDAGraph",
        "torch.npu.NPUGraph.nonexistent",
        "torch.npu.jiterator",
        "torch.npu.matmul.allow_tf32",
        "torch_npu.npu_flash_attn_func",
        "torch_npu.contrib.fuse_add_softmax_dropout",  # listed in __all__ but never bound
        "torch.cuda.synchronize",
        "torch_npu.profiler.ProfilerActivity.CUDA",
        "torch_npu.profiler.ProfilerActivity.PrivateUse1",
        "torch_npu.profiler.key_averages",
        "",
    ],
)
def test_known_absent_names_absent(name):
    assert not load_api().has(name)


def test_npu_name_for_cuda():
    api = load_api()
    assert api.npu_name_for_cuda("torch.cuda.synchronize") == "torch.npu.synchronize"
    assert (
        api.npu_name_for_cuda("torch.cuda.memory.memory_allocated")
        == "torch.npu.memory.memory_allocated"
    )
    assert (
        api.npu_name_for_cuda("torch.cuda.amp.GradScaler") == "torch.npu.amp.GradScaler"
    )
    assert api.npu_name_for_cuda("torch.cuda.graph") == "torch.npu.graph"
    assert api.npu_name_for_cuda("torch.cuda.nvtx.range_push") is None
    assert api.npu_name_for_cuda("torch.cuda.nccl.all_reduce") is None
    assert (
        api.npu_name_for_cuda("torch.cuda.CUDAGraph") is None
    )  # named NPUGraph: a rule's job
    assert api.npu_name_for_cuda("torch.npu.synchronize") is None  # not a CUDA name
    # exists, but marked unusable
    assert api.has("torch.npu.get_device_capability")
    assert api.npu_name_for_cuda("torch.cuda.get_device_capability") is None
    assert "TORCH_NPU_DEVICE_CAPABILITY" in api.unusable_reason(
        "torch.npu.get_device_capability"
    )
    assert api.unusable_reason("torch.npu.synchronize") is None


def test_every_unusable_name_exists():
    api = load_api()
    assert api.unusable
    for name, reason in api.unusable.items():
        assert api.has(name), name
        assert len(reason) > 20


def test_env_vars():
    env = load_api().env_vars
    for name in (
        "HCCL_CONNECT_TIMEOUT",
        "HCCL_EXEC_TIMEOUT",
        "TORCH_HCCL_ASYNC_ERROR_HANDLING",
        "TORCH_HCCL_BLOCKING_WAIT",
        "ASCEND_RT_VISIBLE_DEVICES",
        "TORCH_NPU_DEVICE_CAPABILITY",
    ):
        assert name in env
    assert "NCCL_DEBUG" not in env and "HCCL_SUCCESS" not in env


# -- the generator on a synthetic wheel tree -----------------------------------------------------
FAKE_TREE = {
    "torch_npu/__init__.py": '__all__ = ["lazy_thing"]\nimport os\nfrom torch_npu.version import __version__\n',
    "torch_npu/version.py": "__version__ = '9.9.9'\n",
    "torch_npu/_init/core/_exports.py": (
        '_LAZY_PYTHON_SYMBOLS = {"lazy_thing": ("torch_npu.x", "_y")}\n'
        "def f(globals_dict):\n    globals_dict['ParallelStore'] = 1\n"
    ),
    "torch_npu/_init/patches/distributed_patches.py": (
        '_PUBLIC_API_ALIASES = [("distributed.is_hccl_available", "x"), ("distributed.nn.f._b", "y"),'
        ' ("distributed._private", "z")]\n'
    ),
    "torch_npu/_init/registry/backend.py": (
        "import torch\ndef r():\n    torch.utils.rename_privateuse1_backend('npu')\n"
        "    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True,"
        " for_storage=False)\n"
    ),
    "torch_npu/utils/__init__.py": '__all__ = ["save_async"]\nfrom .serialization import save_async\n',
    "torch_npu/utils/serialization.py": "def save_async(): pass\ndef _hidden(): pass\n",
    "torch_npu/utils/exposed_api.py": "public_npu_functions = ['npu_rms_norm', '_npu_dropout']\n",
    "torch_npu/utils/custom_ops.py": "import torch, torch_npu\ntorch_npu.npu_extra = torch.ops.npu.npu_extra\n",
    "torch_npu/_op_plugin_docs.py": '_add_torch_npu_docstr("npu_doc_only.out", """doc""")\n',
    "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml": (
        "backend: NPU\ncustom:\n- func: npu_rms_norm(Tensor self) -> Tensor\n"
        "- func: npu_swiglu.out(Tensor self) -> Tensor\n  exposed: True\n- func: _npu_dropout(Tensor s) -> Tensor\n"
        "supported:\n- func: add.Tensor(Tensor self) -> Tensor\n"
    ),
    "torch_npu/npu/__init__.py": (
        '__all__ = ["synchronize", "FloatTensor", "Stream", "get_device_capability", "ghost"]\n'
        "import os\nfrom typing import Tuple\n"
        "from .utils import synchronize\nfrom .streams import *\nfrom . import npu_config\n"
        "matmul = npu_config._HF32()\n"
        "def get_device_capability():\n    return os.getenv('TORCH_NPU_DEVICE_CAPABILITY')\n"
        "def __getattr__(name):\n    if name == 'lazy_sub':\n        return 1\n    raise AttributeError(name)\n"
    ),
    "torch_npu/npu/utils.py": "import os\ndef synchronize():\n    return os.environ.get('HCCL_EXEC_TIMEOUT')\n",
    "torch_npu/npu/streams.py": '__all__ = ["Stream"]\nclass Stream: pass\nclass Helper: pass\n',
    "torch_npu/npu/npu_config.py": (
        "class _HF32:\n    @classmethod\n    def __getattr__(cls, name):\n"
        "        if name == 'allow_hf32':\n            return True\n"
    ),
    "torch_npu/npu/amp/__init__.py": (
        '__all__ = ["autocast", "custom_fwd"]\nfrom .autocast_mode import autocast, custom_fwd\n'
    ),
    "torch_npu/npu/amp/autocast_mode.py": "class autocast: pass\ndef custom_fwd(): pass\n",
    "torch_npu/optim/__init__.py": "from .adamw import NpuFusedAdamW\n",
    "torch_npu/optim/adamw.py": "class NpuFusedAdamW: pass\n",
    "torch_npu/contrib/__init__.py": "__all__ = []\n",
    "torch_npu/contrib/transfer_to_npu.py": "import torch, torch_npu\ntorch_npu.should_not_count = 1\n",
    "torch_npu/profiler/__init__.py": (
        "from torch_npu._C._profiler import ProfilerActivity\nfrom .scheduler import Schedule as schedule\n"
        "from .scheduler import ProfilerAction\n"
        '__all__ = ["ProfilerActivity", "schedule", "ProfilerAction"]\n'
    ),
    "torch_npu/profiler/scheduler.py": (
        "import enum\nclass ProfilerAction(enum.Enum):\n    NONE = 0\n    RECORD = 2\n    _hidden = 9\n"
        "class Schedule:\n    def __call__(self, step): pass\n"
    ),
    "torch_npu/profiler/interface.py": (
        "from torch_npu._C._profiler import ProfilerActivity\nX = ProfilerActivity.NPU\n"
    ),
    "torch_npu/_init/memory_users.py": (
        "import torch_npu\nY = torch_npu.profiler.ProfilerActivity.CPU\n"
    ),
    "torch_npu/_init/registry/upstream.py": (
        "from torch._C._profiler import ProfilerActivity\nZ = ProfilerActivity.PrivateUse1\n"
        "ProfilerActivity.name = property(lambda self: 'x')\n"
    ),
}


def _build(tmp_path: Path) -> Path:
    root = tmp_path / "unpacked"
    for rel, text in FAKE_TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    lib = root / "torch_npu" / "lib"
    lib.mkdir()
    (lib / "libfake.so").write_bytes(
        b"\x00TORCH_HCCL_BLOCKING_WAIT\x00XHCCL_NOPE\x00HCCL_SUCCESS\x00junk"
    )
    return root


def test_extract_synthetic_tree(gen, tmp_path, capsys):
    table = gen.extract(_build(tmp_path), "9.9.9")
    mods = table["modules"]
    assert table["torch_npu_version"] == "9.9.9"
    assert mods["torch.npu"] == sorted(
        [
            "synchronize",
            "FloatTensor",
            "Stream",
            "get_device_capability",
            "matmul",
            "npu_config",
            "utils",
            "streams",
            "amp",
            "lazy_sub",
        ]
    )
    assert "ghost" in capsys.readouterr().err  # listed in __all__, bound nowhere
    assert mods["torch.npu.matmul"] == ["allow_hf32"]
    assert mods["torch.npu.amp"] == ["autocast", "autocast_mode", "custom_fwd"]
    assert mods["torch.npu.streams"] == ["Helper", "Stream"]
    assert mods["torch_npu.optim"] == ["NpuFusedAdamW", "adamw"]
    assert mods["torch_npu.utils"] == [
        "custom_ops",
        "exposed_api",
        "save_async",
        "serialization",
    ]
    assert mods["torch.ops.npu"] == [
        "_npu_dropout",
        "npu_extra",
        "npu_rms_norm",
        "npu_swiglu",
    ]
    top = set(mods["torch_npu"])
    assert {
        "npu_rms_norm",
        "npu_swiglu",
        "npu_extra",
        "npu_doc_only",
        "_npu_dropout",
        "lazy_thing",
        "ParallelStore",
        "npu",
        "optim",
        "utils",
        "contrib",
    } <= top
    assert "add" not in top and "should_not_count" not in top and "os" not in top
    assert mods["torch.distributed"] == ["is_hccl_available"]
    # members of exported classes: a Python enum's, and what the sources read from a C++ one
    # (not torch's namesake enum, whose PrivateUse1 torch_npu only aliases)
    assert mods["torch_npu.profiler.ProfilerAction"] == ["NONE", "RECORD"]
    assert mods["torch_npu.profiler.ProfilerActivity"] == ["CPU", "NPU"]
    assert "torch_npu.profiler.schedule" not in mods
    assert mods["torch.Tensor"] == ["is_npu", "npu"]
    assert mods["torch.nn.Module"] == ["npu"]
    assert "torch.UntypedStorage" not in mods
    assert table["env_vars"] == [
        "HCCL_EXEC_TIMEOUT",
        "TORCH_HCCL_BLOCKING_WAIT",
        "TORCH_NPU_DEVICE_CAPABILITY",
    ]
    # UNUSABLE entries are kept only when the wheel has the name
    assert set(table["unusable"]) == {
        "torch.npu.get_device_capability",
        "torch.npu.amp.custom_fwd",
    }


def test_extract_is_deterministic(gen, tmp_path):
    root = _build(tmp_path)
    assert json.dumps(gen.extract(root, "1")) == json.dumps(gen.extract(root, "1"))


def test_main_reads_a_wheel_and_writes_json(gen, tmp_path):
    root = _build(tmp_path)
    wheel = tmp_path / "torch_npu-9.9.9-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(root).as_posix())
    out = tmp_path / "api.json"
    assert gen.main(["--wheel", str(wheel), "--output", str(out)]) == 0
    first = out.read_bytes()
    table = json.loads(first)
    assert table["torch_npu_version"] == "9.9.9"
    assert "torch.npu" in table["modules"]
    assert gen.main(["--wheel", str(wheel), "--output", str(out)]) == 0
    assert out.read_bytes() == first
