"""Focused tests for the distributed rules (NPU2xx) beyond the golden fixtures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npu_migrate.pipeline.npu_api import load_api
from npu_migrate.tables.backends import hccl_backend, mentions_nccl
from npu_migrate.tables.env_vars import ADVICE, SAME_MEANING, ascend_name

from ._run import run

DEVICES = st.sampled_from(["cpu", "cuda", "npu", "xpu"])
BACKENDS = st.sampled_from(["gloo", "nccl", "hccl", "mpi", "ucc"])


@given(st.lists(st.tuples(DEVICES, BACKENDS), min_size=1, max_size=3))
def test_composite_backend_mapping_converges_and_leaves_no_cuda_nccl(pairs):
    spec = ",".join(f"{d}:{b}" for d, b in pairs)
    new = hccl_backend(spec)
    result = new or spec
    assert "nccl" not in result and "cuda:" not in result
    assert hccl_backend(result) is None  # a second pass has nothing to do
    assert mentions_nccl(spec) == ("nccl" in spec)


def test_plain_backend_strings():
    assert hccl_backend("nccl") == "hccl"
    assert hccl_backend("gloo") is None
    assert hccl_backend("hccl") is None
    assert mentions_nccl("NCCL") and not mentions_nccl("nccl is fast")


def test_env_var_targets_exist_in_the_wheel_or_are_documented():
    env_vars = load_api().env_vars
    for old, new in SAME_MEANING.items():
        assert new in env_vars or new in ("HCCL_SOCKET_IFNAME", "ASCEND_RT_VISIBLE_DEVICES"), (old, new)
    assert ascend_name("TORCH_NCCL_BLOCKING_WAIT", env_vars) == "TORCH_HCCL_BLOCKING_WAIT"
    assert ascend_name("TORCH_NCCL_AVOID_RECORD_STREAMS", env_vars) is None
    assert ascend_name("NCCL_BUFFSIZE", env_vars) is None and "NCCL_BUFFSIZE" in ADVICE


def test_backend_through_a_chain_of_variables():
    out, _ = run(
        "import torch.distributed as dist\nDEFAULT = 'nccl'\nbackend = DEFAULT\ndist.init_process_group(backend)\n",
        "NPU201",
    )
    assert "DEFAULT = 'hccl'" in out


def test_variable_bound_in_a_loop_is_reported_not_rewritten():
    source = "import torch.distributed as dist\nfor backend in ('nccl', 'gloo'):\n    dist.new_group([0], backend=backend)\n"
    out, findings = run(source, "NPU201")
    assert out == source
    assert [(f.line, f.rule) for f in findings] == [(2, "NPU201")]


def test_shadowed_torch_is_left_alone():
    source = "def f(torch):\n    torch.distributed.init_process_group('nccl')\n"
    out, _ = run(source, "NPU201", "NPU202")
    assert out == source


@pytest.mark.parametrize(
    "source",
    [
        "import torch.distributed as dist\nif (b := 'gloo'):\n    dist.init_process_group(b)\n",
        "import torch.distributed as dist\nf = lambda b='gloo': dist.init_process_group(b)\n",
        "import torch.distributed as dist\ndist.init_process_group(*args, **kwargs)\n",
        "import torch.distributed as dist\nmatch cfg:\n    case {'backend': b}:\n        dist.init_process_group(b)\n",
        "import torch.distributed as dist\ndef f[T](x: T) -> T:\n    dist.init_process_group(x)\n    return x\n",
        "import torch.distributed as dist\ndist.init_process_group(f'{kind}')\n",
    ],
)
def test_odd_code_does_not_crash_or_change(source):
    out, _ = run(source, "NPU201", "NPU202", "NPU203", "NPU204")
    assert out == source
