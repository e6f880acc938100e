"""Run single ops forward and backward on CPU and on the emulated npu; print a JSON report.

Run under ``npu-migrate emulate``. Each case builds its inputs on CPU from a
fixed seed, runs the op on CPU copies and on npu copies, backpropagates the
same upstream gradient, and reports whether the output and every input
gradient are bitwise equal, plus the autograd node each device recorded (the
node names which kernel the dispatcher chose).
"""

import json
import sys

import torch
import torch_npu  # noqa: F401
from torch.nn import functional as F


def _inputs(seed, *shapes):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=gen) for s in shapes]


def layer_norm():
    x, w, b = _inputs(1, (4, 7, 48), (48,), (48,))
    return (x, w, b), lambda x, w, b: F.layer_norm(x, (48,), w, b, eps=1e-5)


def layer_norm_plain():
    (x,) = _inputs(2, (6, 33))
    return (x,), lambda x: F.layer_norm(x, (33,))


def group_norm():
    x, w, b = _inputs(3, (3, 12, 5, 5), (12,), (12,))
    return (x, w, b), lambda x, w, b: F.group_norm(x, 4, w, b)


def silu():
    (x,) = _inputs(4, (5, 37))
    return (x,), F.silu


def mish():
    (x,) = _inputs(5, (5, 37))
    return (x,), F.mish


def addr():
    m, u, v = _inputs(6, (9, 11), (9,), (11,))
    return (m, u, v), lambda m, u, v: torch.addr(m, u, v, beta=0.5, alpha=2.0)


def _qkv(seed):
    return _inputs(seed, (2, 3, 10, 16), (2, 3, 10, 16), (2, 3, 10, 16))


def sdpa():
    return tuple(_qkv(7)), F.scaled_dot_product_attention


def sdpa_causal():
    return tuple(_qkv(8)), lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True
    )


def sdpa_float_mask():
    q, k, v = _qkv(9)
    (mask,) = _inputs(10, (10, 10))
    return (q, k, v, mask), lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m
    )


def sdpa_bool_mask():
    q, k, v = _qkv(11)
    keep = torch.ones(10, 10).tril().bool()

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep.to(q.device))

    return (q, k, v), fn


CASES = {
    f.__name__: f
    for f in (
        layer_norm,
        layer_norm_plain,
        group_norm,
        silu,
        mish,
        addr,
        sdpa,
        sdpa_causal,
        sdpa_float_mask,
        sdpa_bool_mask,
    )
}


def run(case, device):
    inputs, fn = CASES[case]()
    leaves = [t.to(device).requires_grad_() for t in inputs]
    out = fn(*leaves)
    (upstream,) = _inputs(99, tuple(out.shape))
    out.backward(upstream.to(device))
    grads = [t.grad.to("cpu") if t.grad is not None else None for t in leaves]
    return out.detach().to("cpu"), grads, type(out.grad_fn).__name__, str(out.device)


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


report = {}
for case in sys.argv[1:] or list(CASES):
    out_c, grads_c, node_c, _ = run(case, "cpu")
    out_n, grads_n, node_n, dev = run(case, "npu:0")
    report[case] = {
        "device": dev,
        "forward_equal": same(out_c, out_n),
        "grads_equal": [same(a, b) for a, b in zip(grads_c, grads_n)],
        "max_diff": max(
            [(out_c - out_n).abs().max().item()]
            + [(a - b).abs().max().item() for a, b in zip(grads_c, grads_n) if a is not None]
        ),
        "node_cpu": node_c,
        "node_npu": node_n,
    }
print(json.dumps(report))
