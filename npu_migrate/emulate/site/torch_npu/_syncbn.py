"""``nn.SyncBatchNorm`` on the emulated NPU: the five statistics kernels it calls.

torch's SyncBatchNorm (torch/nn/modules/_functions.py) runs on an accelerator through
``batch_norm_stats``, ``batch_norm_gather_stats_with_counts``, ``batch_norm_elemt``,
``batch_norm_backward_reduce`` and ``batch_norm_backward_elemt``, which ATen has for
CUDA only: no CPU kernel for the emulator's fallback to run. They are written here
from their definitions (the formulas of ATen's CUDA kernels: biased variance per
process, combined with the per-process counts, an unbiased running variance), in
float32 for half inputs as CUDA accumulates, with ordinary ops on the npu tensors.
So a script that converts its model with ``convert_sync_batchnorm`` trains on the
emulator (barlowtwins, DiT-style code). The numbers are not CUDA's to the last bit
(different reduction order); both twins of ``npu-migrate verify`` use these kernels.
"""

from __future__ import annotations

import torch

_LIB: torch.library.Library | None = None


def _reduce_dims(x: torch.Tensor) -> list[int]:
    return [d for d in range(x.dim()) if d != 1]


def _shape(x: torch.Tensor) -> list[int]:
    return [1, -1] + [1] * (x.dim() - 2)


def batch_norm_stats(input, eps):
    x = input.float()
    dims = _reduce_dims(x)
    mean = x.mean(dims)
    var = (x - mean.reshape(_shape(x))).pow(2).mean(dims)
    return mean, torch.rsqrt(var + eps)


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    counts = counts.to(mean.dtype).reshape(-1, 1)
    total = counts.sum()
    var = (1.0 / invstd.pow(2)) - eps
    global_mean = (mean * counts).sum(0) / total
    global_var = (counts * (var + (mean - global_mean).pow(2))).sum(0) / total
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(global_mean.to(running_mean.dtype), alpha=momentum)
    if running_var is not None:
        unbiased = global_var * total / (total - 1).clamp(min=1)
        running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return global_mean, torch.rsqrt(global_var + eps)


def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    shape = _shape(input)
    out = (input.float() - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.float().reshape(shape)
    if bias is not None:
        out = out + bias.float().reshape(shape)
    return out.to(input.dtype)


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    dims = _reduce_dims(input)
    shape = _shape(input)
    dy = grad_out.float()
    xmu = input.float() - mean.reshape(shape)
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * xmu).sum(dims)
    grad_weight = (sum_dy_xmu * invstd) if weight_g else None
    grad_bias = sum_dy if bias_g else None
    if weight is not None:
        grad_weight = grad_weight.to(weight.dtype) if grad_weight is not None else None
        grad_bias = grad_bias.to(weight.dtype) if grad_bias is not None else None
    return (sum_dy if input_g else None, sum_dy_xmu if input_g else None, grad_weight, grad_bias)


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    shape = _shape(input)
    total = count.to(torch.float32).sum()
    xmu = input.float() - mean.reshape(shape)
    invstd_ = invstd.reshape(shape)
    scale = invstd_ * (weight.float().reshape(shape) if weight is not None else 1.0)
    grad = (grad_out.float() - (sum_dy / total).reshape(shape)
            - xmu * invstd_.pow(2) * (sum_dy_xmu / total).reshape(shape)) * scale
    return grad.to(input.dtype)


def register() -> None:
    global _LIB
    if _LIB is not None:
        return
    lib = torch.library.Library("aten", "IMPL")
    for fn in (batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt,
               batch_norm_backward_reduce, batch_norm_backward_elemt):
        lib.impl(fn.__name__, fn, "PrivateUse1")
    _LIB = lib
