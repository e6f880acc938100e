"""Held-out shape 2: optional CUDA-only packages behind CUDA tests named by an import
flag, a predicate's name and a warning; the NPU must take the plain torch paths."""
import json
import types
import warnings

import torch

try:
    import apex  # noqa: F401
    from apex.optimizers import FusedAdam
except ImportError:
    FusedAdam = None

try:
    import triton  # noqa: F401
    _triton_found = True
except ImportError:
    _triton_found = False


def use_xformers():
    return torch.cuda.is_available()


def can_compile_kernels():
    return _triton_found or torch.cuda.is_available()


def configure(args):
    if args.fused_adam and not torch.cuda.is_available():
        warnings.warn("apex FusedAdam requested but CUDA is unavailable; using torch.optim.Adam")
        args.fused_adam = False
    return args


def build(model, args):
    if args.fused_adam:
        return FusedAdam(model.parameters(), lr=0.1)
    return torch.optim.Adam(model.parameters(), lr=0.1)


def attention(q, k, v):
    if use_xformers():
        import xformers.ops as xops
        return xops.memory_efficient_attention(q, k, v)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def main():
    device = torch.device("npu")
    model = torch.nn.Linear(4, 4).to(device)
    args = configure(types.SimpleNamespace(fused_adam=True))
    opt = build(model, args)
    q = torch.randn(1, 2, 3, 4, device=device)
    out = attention(q, q, q)
    loss = model(out).sum()
    loss.backward()
    opt.step()
    print(json.dumps({"optimizer": type(opt).__name__, "triton": bool(can_compile_kernels()), "out": str(out.device)}))


if __name__ == "__main__":
    main()
