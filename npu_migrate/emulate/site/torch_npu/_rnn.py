"""Fused RNN cells for the emulated NPU.

On an accelerator, ATen's LSTM/GRU cells call ``_thnn_fused_lstm_cell`` /
``_thnn_fused_gru_cell``, which only have CUDA kernels. They are registered
here for AutogradPrivateUse1 as compositions of differentiable ops, so autograd
records the pieces and no dedicated backward kernel is needed.
"""

from __future__ import annotations

import torch

_lib = None


def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias
    if hidden_bias is not None:
        gates = gates + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, gates.detach()


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([input_gates, hidden_gates], 1).detach()


def register() -> None:
    global _lib
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("_thnn_fused_lstm_cell", _lstm_cell, "AutogradPrivateUse1")
    _lib.impl("_thnn_fused_gru_cell", _gru_cell, "AutogradPrivateUse1")
