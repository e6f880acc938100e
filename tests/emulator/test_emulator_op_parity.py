"""Single ops on the emulated NPU take CPU's kernels, forward and backward.

These ops have math decompositions registered next to their CPU kernels; a
backend without its own kernel would get the decomposition (or, for SDPA, the
unfused math path) and round differently from CPU. fp32 results and gradients
must be bitwise equal, and autograd must record the same node as on CPU.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

CASES = [
    "layer_norm",
    "layer_norm_plain",
    "group_norm",
    "silu",
    "mish",
    "addr",
    "sdpa",
    "sdpa_causal",
    "sdpa_float_mask",
    "sdpa_bool_mask",
]


@pytest.mark.parametrize("case", CASES)
def test_op_forward_and_grads_bitwise_equal_to_cpu(op_parity, case):
    r = op_parity[case]
    assert r["device"] == "npu:0"
    assert r["node_npu"] == r["node_cpu"]
    assert r["forward_equal"] is True, r["max_diff"]
    assert r["grads_equal"] and all(r["grads_equal"]), r["max_diff"]


def test_every_case_ran(op_parity):
    assert sorted(op_parity) == sorted(CASES)


@pytest.mark.parametrize("case", ["sdpa", "sdpa_causal", "sdpa_bool_mask"])
def test_sdpa_picks_the_cpu_flash_kernel(op_parity, case):
    # Without the emulator's answer to the per-device SDPA backend choice, npu
    # would take the unfused math path (autograd node UnsafeViewBackward0).
    assert op_parity[case]["node_npu"] == "ScaledDotProductFlashAttentionForCpuBackward0"
