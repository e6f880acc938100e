"""Focused tests for the NPU9xx findings (what has no automatic migration)."""

from __future__ import annotations

import pytest

from npu_migrate.pipeline.registry import all_rules
from npu_migrate.pipeline.selection import Selection
from npu_migrate.pipeline.settings import Settings
from npu_migrate.python.engine import migrate_source

#: the rules/unsupported family (NPU901-NPU919); NPU920+ are rules/llm's, some of which fix
NPU9 = sorted(rid for rid, rule in all_rules().items() if rule.__module__.startswith("npu_migrate.rules.unsupported."))


def findings(source: str, select=tuple(NPU9)):
    result = migrate_source("m.py", source.encode(), Settings(selection=Selection.create(list(select))))
    assert result.error is None, result.error
    assert result.new_source is None, "NPU9xx rules only report"
    return result.findings


def test_every_npu9_rule_only_reports():
    assert NPU9, "no NPU9xx rules registered"
    for rid in NPU9:
        assert all_rules()[rid].fixable is False


def test_one_finding_per_import_statement():
    got = findings("from flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache\n")
    assert [(f.line, f.rule) for f in got] == [(1, "NPU901")]
    assert "flash_attn_varlen_func" in got[0].message


@pytest.mark.parametrize(
    "source,where",
    [
        ("try:\n    import xformers.ops\nexcept ImportError:\n    pass\n", "inside try/except"),
        ("if use_apex:\n    from apex import amp\n", "under an `if`"),
        ("def load():\n    import bitsandbytes\n", "inside a function"),
        ("import contextlib\nwith contextlib.suppress(ImportError):\n    import triton\n", "inside a `with` block"),
    ],
)
def test_guarded_imports_get_the_softer_message(source, where):
    (finding,) = findings(source)
    assert finding.message.startswith("guarded import of")
    assert where in finding.message
    assert "fallback" in finding.message


def test_unguarded_import_says_why():
    (finding,) = findings("import cupy\n")
    assert not finding.message.startswith("guarded")
    assert "no Ascend backend" in finding.message


def test_flash_attn_call_sites_get_the_exact_npu_call():
    got = findings("from flash_attn import flash_attn_func\nout = flash_attn_func(q, k, v, dropout_p=0.1, causal=True)\n")
    call = next(f for f in got if f.line == 2)
    for part in ('input_layout="BSND"', "head_num=q.shape[2]", "keep_prob=1.0 - dropout_p", "sparse_mode=3", "[0]"):
        assert part in call.suggestion
    assert "torch_npu.npu_fusion_attention(q, k, v," in call.suggestion


def test_varlen_maps_cu_seqlens_to_actual_seq_len():
    got = findings("import flash_attn\nflash_attn.flash_attn_varlen_func(q, k, v, cu, cu, m, m)\n")
    call = next(f for f in got if f.line == 2)
    assert 'input_layout="TND"' in call.suggestion and "actual_seq_qlen=cu_seqlens_q[1:].tolist()" in call.suggestion


def test_checks_are_not_uses():
    source = (
        "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n    flash_attn_func = None\n"
        "HAS_FLASH = flash_attn_func is not None\n"
        "if flash_attn_func:\n    pass\n"
        "ok = callable(flash_attn_func)\n"
    )
    assert [f.line for f in findings(source)] == [2]


def test_a_parameter_shadowing_the_import_is_not_reported():
    source = "from flash_attn import flash_attn_func\n\ndef f(flash_attn_func):\n    return flash_attn_func(1)\n"
    assert [f.line for f in findings(source)] == [1]


def test_imports_in_npu_aware_branches_are_left_to_npu010():
    source = "if is_torch_npu_available():\n    import torch_npu\nelse:\n    from flash_attn import flash_attn_func\n"
    assert findings(source) == []
    assert [f.rule for f in findings(source, ("NPU9", "NPU010"))] == ["NPU010"]


def test_relative_imports_and_lookalike_packages_are_not_reported():
    source = "from . import flash_attn\nfrom .apex import amp\nimport apexpy\nimport tritonclient\nimport cupyx_like\n"
    assert findings(source) == []


def test_deepspeed_ops_with_npu_builders_are_left_alone():
    source = (
        "import deepspeed\n"
        "from deepspeed.ops.adam import FusedAdam\n"
        "opt = deepspeed.ops.adam.DeepSpeedCPUAdam(params)\n"
        "attn = deepspeed.ops.sparse_attention.SparseSelfAttention(cfg)\n"
        "also = deepspeed.ops.sparse_attention.FixedSparsityConfig(cfg)\n"
    )
    assert [(f.line, f.rule) for f in findings(source)] == [(4, "NPU912"), (5, "NPU912")]


def test_parent_package_access_is_not_repeated_after_its_import():
    source = "import nvidia.dali\nimport nvidia.dali.fn\npipe = nvidia.dali.fn.readers.file(file_root=d)\n"
    assert [f.line for f in findings(source)] == [1, 2]


@pytest.mark.parametrize(
    "backend,reported",
    [(None, True), ("'inductor'", True), ("'cudagraphs'", True), ("'eager'", False), ("'npu'", False), ("name", False)],
)
def test_torch_compile_backends(backend, reported):
    args = "model" if backend is None else f"model, backend={backend}"
    got = findings(f"import torch\nm = torch.compile({args})\n")
    assert bool(got) is reported


def test_compile_that_is_not_torch_is_left_alone():
    source = "import re\nfrom re import compile\np = re.compile('x')\nq = compile('y')\nc = __builtins__.compile('1', 'f', 'eval')\n"
    assert findings(source) == []


def test_cuda_extension_strings_inside_a_reported_call_are_not_repeated():
    source = "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('e', ['a.cpp', 'k.cu'], extra={'x': 'b.cu'})\n"
    got = findings(source)
    assert [(f.line, f.col) for f in got] == [(2, 6)]


def test_dataparallel_names_that_are_not_torch_are_left_alone():
    source = "class DataParallel:\n    pass\n\nm = DataParallel()\nfrom mylib import DataParallel as DP\nn = DP(m)\n"
    assert findings(source) == []


ODD = [
    "import torch.nn as nn\nmatch x:\n    case {'dp': True}:\n        m = nn.DataParallel(m)\n    case _:\n        pass\n",
    "from flash_attn import flash_attn_func as fa\nout = [fa(*qkv, **kw) for qkv in batches]\n",
    "import torch\nif (c := torch.compile(m)) is not None:\n    pass\n",
    "import triton\n@triton.jit\n@other.decorator(1)\ndef k(x):\n    return (lambda y: y)(x)\n",
    "import torch\ndef outer():\n    torch = None\n    return torch.compile(m)\n",
    "import torch\ntype Alias = list[int]\ndef f[T](x: T) -> T:\n    return torch.compile(x)\n",
    "import apex\nf = f'{apex.amp.initialize(m, o)!r:>10}'\n",
    "import torch.nn as nn\nclass P(nn.DataParallel, metaclass=Meta):\n    pass\n",
    "from pynvml import *\nnvmlInit()\n",
    "import torch\nm = torch.compile(*args)\nn = torch._dynamo.optimize(**kw)(f)\n",
]


@pytest.mark.parametrize("source", ODD, ids=range(len(ODD)))
def test_odd_but_valid_code_never_crashes(source):
    findings(source)


def test_shadowed_torch_inside_a_function_is_not_reported():
    source = "import torch\ndef outer():\n    torch = Fake()\n    return torch.compile(m)\n"
    assert findings(source) == []


def test_bare_cuda_extension_strings_are_extension_tests_not_files():
    assert findings("CUDA_EXTS = ['.cu', '.cuh']\nok = path.endswith('.cu')\n") == []
    assert [f.line for f in findings("srcs = glob.glob('*.cu')\n")] == [1]


def test_flash_attn_non_attention_imports_get_their_own_route():
    """safari (held-out round 5): `from flash_attn.ops.layer_norm import dropout_add_layer_norm`
    was told to call npu_fusion_attention; the import of a layer-norm, dense or loss module
    names the op that replaces it, and attention imports keep the attention route."""
    got = findings(
        "from flash_attn.ops.layer_norm import dropout_add_layer_norm\n"
        "from flash_attn.ops.fused_dense import FusedDense, ColumnParallelLinear\n"
        "from flash_attn.losses.cross_entropy import CrossEntropyLoss\n"
        "from flash_attn import flash_attn_func\n",
        select=("NPU901",),
    )
    by_line = {f.line: f.suggestion for f in got}
    assert "layer_norm" in by_line[1] and "npu_fusion_attention" not in by_line[1]
    assert "torch.nn.Linear" in by_line[2] and "fused_dense_lib" in by_line[2]
    assert "CrossEntropyLoss" in by_line[3]
    assert "npu_fusion_attention" in by_line[4]
